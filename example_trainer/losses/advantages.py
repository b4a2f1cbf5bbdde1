"""Group-relative advantages of one group's scores, and the shuffled-score control."""

from __future__ import annotations

from collections.abc import Sequence

import torch

_STD_EPS = 1e-6


def group_advantages(scores: Sequence[float], mode: str = "grpo") -> list[float]:
    """Group-relative advantages of one group's scores.

    ``grpo``: (s - mean) / (std + eps) with the population std; a group whose scores are all equal gets
    zeros. ``mean_only`` (Dr. GRPO): s - mean.
    """
    if len(scores) == 0:
        return []
    t = torch.tensor(list(scores), dtype=torch.float64)
    centred = t - t.mean()
    if mode == "mean_only":
        out = centred
    elif mode == "grpo":
        out = centred / (t.std(unbiased=False) + _STD_EPS)
    else:
        raise ValueError(f"advantage_mode must be 'grpo' or 'mean_only', got {mode!r}")
    return [float(x) for x in out]


def shuffled_scores(scores: Sequence[float], generator: torch.Generator) -> list[float]:
    """The control experiment: the same scores, randomly permuted within the group."""
    perm = torch.randperm(len(scores), generator=generator).tolist()
    return [float(scores[i]) for i in perm]


__all__ = ["group_advantages", "shuffled_scores"]
