"""Memory of one trainer step on a Qwen2.5-0.5B-shaped model: chunked log-probs and gradient
checkpointing, each alone and together, against the full-vocabulary path without checkpointing.

The model has Qwen2.5-0.5B's width and vocabulary (hidden 896, intermediate 4864, 14 heads / 2 KV heads,
vocab 151,936) built locally with random weights; fewer layers than the real 24 are fine (``--layers``,
default 2), since the logits' share of the memory does not depend on depth.

Each (path, tokens) configuration runs in its own process, which builds the model and AdamW and runs
one small warm-up step (allocating AdamW's moments), then measures one whole optimizer step as the
trainer runs it: ``zero_grad(set_to_none=True)``, the real ``train_step`` forward/backward on a
micro-batch of ``tokens`` tokens (sequences of ``--seq-len``), gradient-norm clipping and
``optimizer.step()``. It prints the memory that step needed *above* what the weights and AdamW's state
hold: the peak RSS on CPU (``/proc/self/status`` VmHWM after resetting it through
``/proc/self/clear_refs``) or ``torch.cuda.max_memory_allocated`` on GPU, minus the value just before
the step. So the figure includes the gradients, the activations, the logits and the optimizer's
temporaries.

Paths (``--paths``, default all four):

* ``full``: full-vocabulary logits and fp32 log-softmax (``--logprob-chunk-tokens 0``), no checkpointing
  (the old default);
* ``full+ckpt``: the same with gradient checkpointing (checkpointing alone);
* ``chunked``: chunked sampled-token log-probabilities (512 positions at a time), no checkpointing
  (chunking alone);
* ``chunked+ckpt``: both (the GPU default now).

The summary prints, per size where the needed paths ran, the ratio of ``full`` to each of the others:
chunking alone, checkpointing alone, both.

On CPU the full-vocabulary paths only run at 4k tokens by default (at 16k they need ~4x as much, beyond
this kind of machine) and a chunked configuration whose predicted peak (extrapolated linearly from the
two largest measured sizes of that path) exceeds ``--cpu-peak-limit-gib`` (default 8) is skipped with a
line saying so.

Usage: python bench/trainer_memory.py [--tokens 4096,16384,32768] [--paths full,chunked] [--layers 2]
       [--device cpu|cuda]
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from random_groups import random_groups

REPO = Path(__file__).resolve().parents[1]
# path -> (chunked log-probs, gradient checkpointing)
PATHS = {
    "full": (False, False),
    "full+ckpt": (False, True),
    "chunked": (True, False),
    "chunked+ckpt": (True, True),
}


# ----------------------------------------------------------------------------------------------
# One configuration, in its own process
# ----------------------------------------------------------------------------------------------
def _rss_kib(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise RuntimeError(f"no {field} in /proc/self/status")


def run_child(spec: dict[str, Any]) -> dict[str, Any]:
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    from example_trainer.batching import flatten_batch
    from example_trainer.config import TrainingConfig
    from example_trainer.distributed import DistInfo
    from example_trainer.model_setup import enable_gradient_checkpointing
    from example_trainer.train_step import train_step

    torch.manual_seed(0)
    torch.set_num_threads(spec["threads"])
    device = torch.device(spec["device"])
    config = Qwen2Config(
        vocab_size=spec["vocab"],
        hidden_size=spec["hidden"],
        intermediate_size=spec["intermediate"],
        num_hidden_layers=spec["layers"],
        num_attention_heads=spec["heads"],
        num_key_value_heads=spec["kv_heads"],
        max_position_embeddings=max(spec["seq_len"], 128),
        tie_word_embeddings=True,
        use_cache=False,
    )
    model = Qwen2ForCausalLM(config).to(device).train()
    chunked, checkpointing = PATHS[spec["path"]]
    if checkpointing:
        enable_gradient_checkpointing(model)
    cfg = TrainingConfig(
        model_name="bench",
        seq_len=spec["seq_len"],
        micro_batch_tokens=10**9,  # the whole micro-batch in one forward: what is measured
        skip_zero_advantage=False,  # every sequence computed, whatever its scores
        logprob_chunk_tokens=spec.get(
            "chunk", TrainingConfig.model_fields["logprob_chunk_tokens"].default if chunked else 0
        ),
        dtype=spec["dtype"],
        lr=1e-6,
    )
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.lr)
    pad = 0

    def optimizer_step(flat: Any) -> dict[str, float]:
        """The trainer's loop body (grpo.train): zero_grad, forward/backward, clip, AdamW step."""
        opt.zero_grad(set_to_none=True)
        stats = train_step(model, None, flat, cfg, DistInfo(), device, pad)
        torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.max_grad_norm)
        opt.step()
        return stats

    # warm-up: allocates AdamW's moments (held from then on, like the weights)
    optimizer_step(
        flatten_batch(random_groups(16, 16, spec["vocab"], 1, inference_logprobs=True), seq_len=16)
    )
    opt.zero_grad(set_to_none=True)
    flat = flatten_batch(
        random_groups(spec["tokens"], spec["seq_len"], spec["vocab"], 2, inference_logprobs=True),
        seq_len=spec["seq_len"],
    )
    gc.collect()
    cuda = device.type == "cuda"
    if cuda:
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        before = torch.cuda.memory_allocated()
    else:
        Path("/proc/self/clear_refs").write_text("5")  # VmHWM := current RSS
        before = _rss_kib("VmRSS") * 1024
    t0 = time.perf_counter()
    stats = optimizer_step(flat)
    if cuda:
        torch.cuda.synchronize()
        peak = torch.cuda.max_memory_allocated()
    else:
        peak = _rss_kib("VmHWM") * 1024
    seconds = time.perf_counter() - t0
    n_params = sum(p.numel() for p in model.parameters())
    return {
        "path": spec["path"],
        "tokens": int(stats["seq_tokens"]),
        "step_mib": (peak - before) / 2**20,
        "held_mib": before / 2**20,
        "peak_mib": peak / 2**20,
        "seconds": seconds,
        "params": n_params,
        "loss": stats["loss"],
    }


# ----------------------------------------------------------------------------------------------
# The driver
# ----------------------------------------------------------------------------------------------
def measure(spec: dict[str, Any]) -> dict[str, Any]:
    env = dict(os.environ)
    env.update(
        OMP_NUM_THREADS=str(spec["threads"]),
        TRANSFORMERS_VERBOSITY="error",
        PYTHONPATH=os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")]).rstrip(os.pathsep),
    )
    cmd = [sys.executable, str(Path(__file__).resolve()), "--child", json.dumps(spec)]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=REPO)
    if proc.returncode != 0:
        tail = (proc.stderr.strip().splitlines() or ["killed"])[-1]
        oom = "out of memory" in proc.stderr.lower() or proc.returncode in (-9, 137)
        return {"path": spec["path"], "tokens": spec["tokens"], "error": "OOM" if oom else tail}
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _label(tokens: int) -> str:
    return f"{tokens // 1024}k" if tokens % 1024 == 0 else str(tokens)


def _predicted_peak_mib(results: dict, path: str, tokens: int) -> float | None:
    """Peak at ``tokens`` extrapolated linearly from the two largest measured sizes of ``path``."""
    done = sorted((t, r) for (pp, t), r in results.items() if pp == path and "error" not in r)
    if len(done) < 2:
        return None
    (ta, ra), (tb, rb) = done[-2], done[-1]
    slope = (rb["step_mib"] - ra["step_mib"]) / (tb - ta)
    return rb["held_mib"] + rb["step_mib"] + slope * (tokens - tb)


def summary_lines(results: dict, sizes: list[int]) -> list[str]:
    """Per size: full-vocab step memory over each other path's (chunking alone, checkpointing
    alone, both)."""
    lines = []
    effects = (
        ("chunking alone", "chunked"),
        ("checkpointing alone", "full+ckpt"),
        ("both", "chunked+ckpt"),
    )
    for tokens in sizes:
        full = results.get(("full", tokens))
        if not full or "error" in full:
            continue
        parts = []
        for name, path in effects:
            r = results.get((path, tokens))
            if r and "error" not in r:
                parts.append(
                    f"{name} x{full['step_mib'] / max(r['step_mib'], 1e-9):.1f} "
                    f"({r['step_mib']:.0f} MiB)"
                )
        if parts:
            lines.append(
                f"{_label(tokens)} tokens: full-vocab without checkpointing {full['step_mib']:.0f} "
                f"MiB; " + ", ".join(parts)
            )
    return lines


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument(
        "--tokens", default="4096,16384,32768", help="micro-batch sizes, comma-separated"
    )
    p.add_argument(
        "--paths", default=",".join(PATHS), help=f"comma-separated, of {', '.join(PATHS)}"
    )
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--hidden", type=int, default=896)
    p.add_argument("--intermediate", type=int, default=4864)
    p.add_argument("--heads", type=int, default=14)
    p.add_argument("--kv-heads", type=int, default=2)
    p.add_argument("--vocab", type=int, default=151936)
    p.add_argument("--seq-len", type=int, default=2048)
    p.add_argument("--device", default="auto", help="cpu, cuda or auto")
    p.add_argument("--dtype", default="auto", help="the trainer's --dtype (auto: bf16 on GPU)")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument(
        "--full-max-tokens",
        type=int,
        default=None,
        help="largest micro-batch the full-vocab paths run (default: 4096 on CPU, all on GPU)",
    )
    p.add_argument("--cpu-peak-limit-gib", type=float, default=8.0)
    p.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        print(json.dumps(run_child(json.loads(args.child))), flush=True)
        return 0

    import torch

    device = args.device
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    cpu = device == "cpu"
    sizes = [int(x) for x in args.tokens.split(",") if x.strip()]
    paths = [x.strip() for x in args.paths.split(",") if x.strip()]
    unknown = [x for x in paths if x not in PATHS]
    if unknown:
        p.error(f"--paths: unknown {unknown}; choose from {list(PATHS)}")
    full_max = args.full_max_tokens or (4096 if cpu else max(sizes))
    base = {
        k: getattr(args, k)
        for k in ("layers", "hidden", "intermediate", "heads", "kv_heads", "vocab", "seq_len")
    }
    base.update(device=device, dtype=args.dtype, threads=args.threads)
    print(
        f"model: hidden {args.hidden}, intermediate {args.intermediate}, {args.layers} layers, "
        f"vocab {args.vocab}, device {device}, dtype {args.dtype}; memory of one optimizer step "
        f"(zero_grad, forward/backward, clip, AdamW step) above weights + AdamW state "
        f"({'peak RSS' if cpu else 'max_memory_allocated'})",
        flush=True,
    )
    print(f"{'tokens':>7} {'path':>12} {'step MiB':>9} {'held MiB':>9} {'s':>6}", flush=True)
    results: dict[tuple[str, int], dict[str, Any]] = {}
    for tokens in sizes:
        for path in paths:
            chunked, _ = PATHS[path]
            if not chunked and tokens > full_max:
                print(f"{_label(tokens):>7} {path:>12}   skipped (--full-max-tokens {full_max})")
                continue
            predicted = _predicted_peak_mib(results, path, tokens) if cpu else None
            if predicted is not None and predicted > args.cpu_peak_limit_gib * 1024:
                print(
                    f"{_label(tokens):>7} {path:>12}   skipped on CPU: predicted peak "
                    f"{predicted / 1024:.1f} GiB > --cpu-peak-limit-gib "
                    f"{args.cpu_peak_limit_gib:g} (runs on a GPU or with a higher limit)",
                    flush=True,
                )
                continue
            r = measure(dict(base, path=path, tokens=tokens))
            results[(path, tokens)] = r
            if "error" in r:
                print(f"{_label(tokens):>7} {path:>12}   failed: {r['error']}", flush=True)
            else:
                print(
                    f"{_label(tokens):>7} {path:>12} {r['step_mib']:9.0f} {r['held_mib']:9.0f} "
                    f"{r['seconds']:6.1f}",
                    flush=True,
                )
    for path in paths:
        done = sorted((t, r) for (pp, t), r in results.items() if pp == path and "error" not in r)
        if len(done) >= 2:
            (t0, r0), (t1, r1) = done[0], done[-1]
            growth = r1["step_mib"] / max(r0["step_mib"], 1e-9)
            print(
                f"{path} growth {_label(t0)} -> {_label(t1)} tokens: x{growth:.2f} "
                f"(linear: x{t1 / t0:.2f})"
            )
    lines = summary_lines(results, sizes)
    for line in lines:
        print(line)
    if not lines:
        print("no size with the full path and another path measured (include 4096 in --tokens)")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
