"""The flags every preset's env and trainer sections share (one table each): a preset's
``topology_parts`` adds only what differs."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any, Optional


def common_env_flags(args: argparse.Namespace, model: str, out: Path) -> dict[str, Any]:
    """The env's ``--env.*`` flags of every preset: the run's steps, group size, seed and schedule,
    at most one batch ahead of the trainer, a worker per prompt of a step, its spool under ``out``."""
    return {
        "tokenizer_name": model,
        "group_size": args.group_size,
        "max_batches_offpolicy": 1,
        # turns: each batch waits for the weights of the step before (no policy lag)
        "on_policy": args.schedule == "turns",
        "total_steps": args.steps,
        "seed": args.seed,
        "spool_dir": str(out / "spool"),
        "max_num_workers": args.prompts_per_step,
    }


def env_section(
    name: str,
    env_file: Path,
    served_name: str,
    env_flags: dict[str, Any],
    openai: Optional[dict[str, Any]] = None,
) -> dict[str, Any]:
    """One env of the topology: ``env_file`` run with ``env_flags`` (``common_env_flags`` and the
    preset's own), sampling ``served_name`` from the inference server (``openai``: more of its flags)."""
    return {
        "name": name,
        "file": str(env_file),
        "flags": {
            "env": env_flags,
            "openai": {
                "api_key": "x",
                "model_name": served_name,
                "server_type": "vllm",
                **(openai or {}),
            },
        },
    }


def run_trainer_flags(
    args: argparse.Namespace, model: str, out: Path, seq_len: int
) -> dict[str, Any]:
    """The trainer flags of every preset: the run's steps, batch, learning rate, seed and control,
    on the CPU, its weights published after every step, its folder ``out/trainer``."""
    return {
        "model_name": model,
        "vllm_restart_interval": 1,
        "training_steps": args.steps,
        "batch_size": args.prompts_per_step * args.group_size,
        "seq_len": seq_len,
        "lr": args.lr,
        "save_path": str(out / "trainer"),
        "control": args.control,
        "seed": args.seed,
        "device": "cpu",
    }
