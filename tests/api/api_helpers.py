"""Builders of realistic groups and registrations shared by the API tests."""

from __future__ import annotations

import random
from typing import Any, Optional

REGISTRATION = {
    "wandb_group": "grp",
    "wandb_project": "proj",
    "batch_size": 8,
    "max_token_len": 64,
    "checkpoint_dir": "ckpt",
    "save_checkpoint_interval": 5,
    "starting_step": 0,
    "num_steps": 100,
}


def registration(**over: Any) -> dict[str, Any]:
    return {**REGISTRATION, **over}


def env_registration(name: str = "arith", group_size: int = 2, **over: Any) -> dict[str, Any]:
    return {
        "max_token_length": 64,
        "desired_name": name,
        "weight": 1.0,
        "group_size": group_size,
        **over,
    }


def group(
    n: int = 2, length: int = 6, env_id: Optional[int] = None, seed: int = 0, **extra: Any
) -> dict[str, Any]:
    rng = random.Random(seed)
    tokens = [[rng.randint(1, 500) for _ in range(length)] for _ in range(n)]
    g: dict[str, Any] = {
        "tokens": tokens,
        "masks": [[-100, -100] + t[2:] for t in tokens],
        "scores": [rng.choice([0.0, 1.0]) for _ in range(n)],
        "inference_logprobs": [[-rng.random() for _ in t] for t in tokens],
        "messages": [
            [{"role": "user", "content": "1+1?"}, {"role": "assistant", "content": "2"}]
            for _ in range(n)
        ],
    }
    if env_id is not None:
        g["env_id"] = env_id
    g.update(extra)
    return g
