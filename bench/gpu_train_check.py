"""GRPO trainer steps on a model of a real shape with random weights: tokens/s, MFU and peak memory.

The model is built on the device from a config written here (no download): Qwen2.5-0.5B or Qwen2.5-1.5B
(their real hidden sizes, layers, heads and the 151,936-token vocabulary, tied embeddings), or ``tiny``
(the same vocabulary, 2 small layers: a CPU smoke test of this script). Each configuration runs the
trainer's own ``train_step`` on one micro-batch of ``tokens`` tokens (sequences of at most 4,096, a
quarter prompt, groups of 2 scored 0/1) with bf16 compute over fp32 master weights (autocast) and
gradient checkpointing, followed by gradient clipping and the AdamW step; both are in the timed window.

Two paths beside each other, differing only in the output head:

* ``chunked``: the sampled-token log-probabilities computed 512 positions at a time (the default);
* ``full-vocab``: full ``[tokens, vocab]`` logits and log-softmax (``logprob_chunk_tokens=0``).

A configuration that runs out of GPU memory is reported as ``OOM`` (and larger token counts of the same
path are not tried). MFU = 6 x parameters x tokens/s / peak, with the bf16 dense peak measured on an
H100/H200 (790 TFLOP/s, an 8192^3 matmul); recomputation by checkpointing and attention FLOPs are not
counted, as usual for MFU. Peak memory is ``torch.cuda.max_memory_allocated`` over the measured steps
(weights, gradients and AdamW state included).

Prints one line per configuration and, with ``--json-out``, writes the rows as JSON. Exit 1 with one
line where CUDA is missing (``--device cuda``, the default).

Usage: python bench/gpu_train_check.py [--shape qwen2.5-0.5b] [--tokens 4096,16384,32768]
       [--paths chunked,full-vocab] [--steps 2] [--deadline-s 300] [--json-out FILE] [--device cuda|cpu]
"""

from __future__ import annotations

import argparse
import gc
import json
import sys
import time
from pathlib import Path
from typing import Any

from random_groups import random_groups

PEAK_BF16_TFLOPS = 790.0  # H100/H200 dense bf16, measured (8192^3 matmul); docs/training.md
MAX_SEQ = 4096
VOCAB = 151936

# Qwen2.5 configs as published (hidden, intermediate, layers, heads, KV heads); tied embeddings.
SHAPES: dict[str, dict[str, int]] = {
    "qwen2.5-0.5b": dict(hidden=896, intermediate=4864, layers=24, heads=14, kv_heads=2),
    "qwen2.5-1.5b": dict(hidden=1536, intermediate=8960, layers=28, heads=12, kv_heads=2),
    "tiny": dict(hidden=64, intermediate=128, layers=2, heads=4, kv_heads=2),
}
PATHS = {"chunked": 512, "full-vocab": 0}  # logprob_chunk_tokens


def build_model(shape: str, device: Any, max_len: int) -> Any:
    """A Qwen2ForCausalLM of ``shape`` with random weights, created directly on ``device`` in fp32."""
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    s = SHAPES[shape]
    config = Qwen2Config(
        vocab_size=VOCAB,
        hidden_size=s["hidden"],
        intermediate_size=s["intermediate"],
        num_hidden_layers=s["layers"],
        num_attention_heads=s["heads"],
        num_key_value_heads=s["kv_heads"],
        max_position_embeddings=max(max_len, 32768),
        rope_theta=1000000.0,
        rms_norm_eps=1e-6,
        tie_word_embeddings=True,
        use_cache=False,
    )
    torch.manual_seed(0)
    with torch.device(device):
        model = Qwen2ForCausalLM(config)
    return model.to(device=device, dtype=torch.float32).train()


def _is_oom(e: BaseException) -> bool:
    import torch

    return isinstance(e, torch.cuda.OutOfMemoryError) or "out of memory" in str(e).lower()


def measure(
    model: Any, opt: Any, device: Any, tokens: int, path: str, steps: int
) -> dict[str, Any]:
    """One warm-up step and ``steps`` timed steps of one configuration; raises on OOM."""
    import torch

    from example_trainer.batching import flatten_batch
    from example_trainer.config import TrainingConfig
    from example_trainer.distributed import DistInfo
    from example_trainer.train_step import train_step

    seq_len = min(tokens, MAX_SEQ)
    cfg = TrainingConfig(
        model_name="random-weights",
        seq_len=seq_len,
        micro_batch_tokens=tokens,  # the whole batch is one forward/backward: what is measured
        skip_zero_advantage=False,  # every sequence computed (a lone one has advantage 0)
        logprob_chunk_tokens=PATHS[path],
        dtype="bfloat16",
        lr=1e-6,
        use_inference_logprobs=False,
    )
    flat = flatten_batch(random_groups(tokens, seq_len, VOCAB, seed=tokens), seq_len=seq_len)
    cuda = device.type == "cuda"
    rates: list[float] = []
    last: dict[str, Any] = {}
    for i in range(steps + 1):
        if cuda:
            torch.cuda.synchronize(device)
            if i == 1:
                torch.cuda.reset_peak_memory_stats(device)
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=False)
        stats = train_step(model, None, flat, cfg, DistInfo(), device, 0)
        torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.max_grad_norm)
        opt.step()
        if cuda:
            torch.cuda.synchronize(device)
        dt = time.perf_counter() - t0
        if i > 0:  # step 0 warms up kernels and allocates the optimizer state
            rates.append(stats["seq_tokens"] / dt)
        last = stats
    return {
        "positions": int(last["seq_tokens"]),  # trained positions (tokens minus one per sequence)
        "tokens_per_s": sum(rates) / len(rates),
        "peak_gib": torch.cuda.max_memory_allocated(device) / 2**30 if cuda else None,
        "loss": float(last["loss"]),
    }


def run_shape(
    shape: str,
    token_sizes: list[int],
    paths: list[str],
    device_name: str,
    steps: int,
    deadline: float,
    emit: Any = print,
    on_row: Any = None,
) -> list[dict[str, Any]]:
    """Every (path, tokens) configuration of one model shape; one row each, in order."""
    import torch

    device = torch.device(device_name)
    model = build_model(shape, device, max(token_sizes))
    n_params = sum(p.numel() for p in model.parameters())
    from example_trainer.model_setup import enable_gradient_checkpointing

    enable_gradient_checkpointing(model)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-6, betas=(0.9, 0.99))
    rows = []
    for path in paths:
        oom_at = None
        for tokens in token_sizes:
            row: dict[str, Any] = {
                "model": shape,
                "params": n_params,
                "path": path,
                "tokens": tokens,
            }
            if oom_at is not None:
                row["status"] = f"OOM (at {oom_at} already)"
            elif time.monotonic() > deadline:
                row["status"] = "skipped (time)"
            else:
                try:
                    row.update(measure(model, opt, device, tokens, path, steps))
                    row["mfu"] = 6 * n_params * row["tokens_per_s"] / (PEAK_BF16_TFLOPS * 1e12)
                    row["status"] = "ok"
                except Exception as e:
                    if not _is_oom(e):
                        raise
                    row["status"] = "OOM"
                    oom_at = tokens
                finally:
                    opt.zero_grad(set_to_none=False)  # keep the grads allocated, drop the rest
                    gc.collect()
                    if device.type == "cuda":
                        torch.cuda.empty_cache()
            rows.append(row)
            emit(format_row(row))
            if on_row is not None:
                on_row(rows)
    return rows


def format_row(r: dict[str, Any]) -> str:
    head = f"{r['model']:<13} {r['params'] / 1e6:>6.0f}M {r['tokens']:>6} {r['path']:<11}"
    if r.get("status") != "ok":
        return f"{head} {r.get('status', '?')}"
    peak = "-" if r.get("peak_gib") is None else f"{r['peak_gib']:.1f}"
    return f"{head} {r['tokens_per_s']:>10,.0f} {100 * r['mfu']:>6.1f}% {peak:>9}"


TABLE_HEAD = f"{'model':<13} {'params':>7} {'tokens':>6} {'path':<11} {'tokens/s':>10} {'MFU':>7} {'peak GiB':>9}"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--shape", default="qwen2.5-0.5b", choices=sorted(SHAPES))
    p.add_argument("--tokens", default="4096,16384,32768", help="comma-separated token counts")
    p.add_argument("--paths", default="chunked,full-vocab", help="chunked, full-vocab or both")
    p.add_argument(
        "--steps", type=int, default=2, help="timed steps per configuration (after 1 warm-up)"
    )
    p.add_argument(
        "--deadline-s", type=float, default=600.0, help="start no configuration after this"
    )
    p.add_argument("--json-out", type=Path, default=None)
    p.add_argument(
        "--device",
        default="cuda",
        choices=["cuda", "cpu"],
        help="cpu only smoke-tests this script (its figures are not GPU figures)",
    )
    args = p.parse_args(argv)
    import torch

    if args.device == "cuda" and not torch.cuda.is_available():
        print(
            "gpu_check: error: no CUDA device (torch.cuda.is_available() is False); "
            "run this on a machine with an NVIDIA GPU and a CUDA build of torch",
            file=sys.stderr,
        )
        return 1
    paths = [s for s in args.paths.split(",") if s]
    bad = [s for s in paths if s not in PATHS]
    if bad:
        p.error(f"--paths: unknown {bad}; choose from {sorted(PATHS)}")
    deadline = time.monotonic() + args.deadline_s
    print(TABLE_HEAD, flush=True)
    rows = run_shape(
        args.shape,
        [int(t) for t in args.tokens.split(",") if t],
        paths,
        args.device,
        args.steps,
        deadline,
        emit=lambda line: print(line, flush=True),
        on_row=lambda rows: _write(args.json_out, rows),
    )
    _write(args.json_out, rows)
    return 0


def _write(path: Path | None, rows: list[dict[str, Any]]) -> None:
    """After every row, so a run cut short by its time box still leaves what it measured."""
    if path is not None:
        path.write_text(json.dumps(rows, indent=1) + "\n")


if __name__ == "__main__":
    sys.exit(main())
