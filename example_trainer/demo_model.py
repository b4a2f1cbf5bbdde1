"""The demo's policy: a tiny Llama built from nothing and warmed up on gold arithmetic answers.

``python -m example_trainer.demo_model OUT`` writes ``OUT/base`` (the random model), ``OUT/warm`` (after
the supervised warm-up: a random model never samples a right answer, so RL alone would see only zero
rewards) and ``OUT/prep.json`` (greedy accuracy, seconds, parameter count). ``atropos-demo`` calls
``prepare`` in-process; the CPU launch topology (configs/launch/demo_cpu.yaml) runs this module as its
prepare step. ``topology_parts`` is the tiny preset's inference, env and trainer sections of the demo's
topology.
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
    from example_trainer.arithmetic_task import all_problems, make_problem, score_completion
    from example_trainer.warmup import greedy_accuracy, sft_warmup

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


def topology_parts(
    args: argparse.Namespace, model_dir: Path, out: Path, env_file: Path
) -> dict[str, Any]:
    """The inference, env and trainer sections of the tiny-model run."""
    model = str(model_dir)
    if args.inference == "vllm":
        server: dict[str, Any] = {"kind": "vllm", "args": ["--max-model-len", "256"]}
    else:
        server = {
            "kind": "engine",
            "args": [
                "--torch-threads",
                str(args.threads),
                "--batch-window-ms",
                "10",
                "--refresh-mode",
                getattr(args, "engine_refresh", "keep"),
            ],
        }
    return {
        "inference": [{"name": "engine", "model": model, "served_name": "policy", **server}],
        "envs": [
            {
                "name": "arithmetic",
                "file": str(env_file),
                "flags": {
                    "env": {
                        "tokenizer_name": model,
                        "group_size": args.group_size,
                        "max_batches_offpolicy": 1,
                        "on_policy": args.schedule == "turns",
                        "total_steps": args.steps,
                        "seed": args.seed,
                        "spool_dir": str(out / "spool"),
                        "max_num_workers": args.prompts_per_step // 2,
                    },
                    "openai": {"api_key": "x", "model_name": "policy", "server_type": "vllm"},
                },
            }
        ],
        "trainer": {
            "flags": {
                "model_name": model,
                "weight_refresh": "reload",
                "vllm_restart_interval": 1,
                "training_steps": args.steps,
                "batch_size": args.prompts_per_step * args.group_size,
                "seq_len": 64,
                "lr": args.lr,
                "save_path": str(out / "trainer"),
                "torch_threads": args.threads,
                "control": args.control,
                "seed": args.seed,
                "device": "cpu",
            }
        },
    }


def checkpoint_params(model_dir: Path) -> int:
    """Parameters stored in ``model_dir/model.safetensors`` (read from the tensor shapes, no load)."""
    from safetensors import safe_open

    n_params = 0
    with safe_open(str(model_dir / "model.safetensors"), "pt") as f:
        for k in f.keys():
            size = 1
            for d in f.get_slice(k).get_shape():
                size *= int(d)
            n_params += size
    return n_params


def main(argv: Optional[list[str]] = None) -> int:
    p = argparse.ArgumentParser(prog="python -m example_trainer.demo_model", description=__doc__)
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
