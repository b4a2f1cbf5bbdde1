"""The tiny preset's policy: a tiny Llama built from nothing and warmed up on gold arithmetic answers.

``python -m demo.tiny_model OUT`` writes ``OUT/base`` (the random model), ``OUT/warm`` (after the
supervised warm-up: a random model never samples a right answer, so RL alone would see only zero
rewards) and ``OUT/prep.json`` (greedy accuracy, seconds, parameter count). ``atropos-demo`` calls
``prepare`` in-process; the CPU launch topologies (configs/launch/demo_cpu.yaml, ray_cpu.yaml) run this
module as their prepare step.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path
from typing import Any, Optional


def prepare(out: Path, warmup_sft_steps: int, seed: int, threads: int) -> dict[str, Any]:
    """Build the tiny model under ``out`` and run the warm-up; returns the paths and figures."""
    import torch
    from transformers.utils import logging as hf_logging

    from atroposlib.inference.tiny_model import build_tiny_model
    from atroposlib.utils.arithmetic_task import all_problems, make_problem, score_completion
    from demo.model_size import checkpoint_params
    from demo.warmup import greedy_accuracy, sft_warmup

    hf_logging.disable_progress_bar()
    hf_logging.set_verbosity_error()
    torch.set_num_threads(max(1, threads))
    base = build_tiny_model(out / "base", seed=seed)

    def gold(rng: random.Random, n: int) -> list[tuple[str, str]]:
        return [(p.prompt, p.answer) for p in (make_problem(rng) for _ in range(n))]

    t0 = time.perf_counter()
    warm = sft_warmup(base, out / "warm", gold, steps=warmup_sft_steps, seed=seed)
    acc = greedy_accuracy(warm, all_problems(), score_completion)
    n_params = checkpoint_params(warm)
    prep = {
        "base": base,
        "warm": warm,
        "warm_acc": acc,
        "warm_s": time.perf_counter() - t0,
        "n_params": n_params,
    }
    (out / "prep.json").write_text(
        json.dumps({k: str(v) if isinstance(v, Path) else v for k, v in prep.items()})
    )
    return prep


def main(argv: Optional[list[str]] = None) -> int:
    p = argparse.ArgumentParser(prog="python -m demo.tiny_model", description=__doc__)
    p.add_argument("out", type=Path, help="folder for base/, warm/ and prep.json")
    p.add_argument("--warmup-sft-steps", type=int, default=100)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=1)
    args = p.parse_args(argv)
    prep = prepare(args.out, args.warmup_sft_steps, args.seed, args.threads)
    print(f"warm model at {prep['warm']}: greedy accuracy {prep['warm_acc']:.2f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
