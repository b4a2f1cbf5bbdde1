"""Advantage helpers kept under Atropos's names (``atroposlib.utils.advantages``).

``compute_grpo_process_supervision_advantages`` normalises per-step rewards of a group (jagged lists
allowed) by the group's mean and standard deviation, then turns them into reward-to-go per step
(discounted when ``gamma`` is given).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Optional, Union

import numpy as np

from atroposlib.type_definitions import number


def allclose_to_first(
    values: Any,
    rtol: float = 1e-05,
    atol: float = 1e-08,
    equal_nan: bool = False,
    return_vector: bool = False,
) -> Union[np.ndarray, bool]:
    """Whether every entry of ``values`` (a rectangular nested sequence) is close to ``values[0]``;
    with ``return_vector`` one bool per entry (the first is always True)."""
    arr = np.asarray(values)
    close = np.isclose(arr, arr[0], rtol=rtol, atol=atol, equal_nan=equal_nan)
    per_entry = close.reshape(close.shape[0], -1).all(axis=1)
    return per_entry if return_vector else bool(per_entry.all())


def _flatten(data: Any) -> list[float]:
    if isinstance(data, (int, float, np.integer, np.floating)):
        return [float(data)]
    if isinstance(data, (str, bytes, dict)) or not hasattr(data, "__iter__"):
        raise ValueError(f"Invalid element type encountered: {type(data)}")
    out: list[float] = []
    for x in data:
        out.extend(_flatten(x))
    return out


def compute_stats(data: Sequence[Union[number, Sequence]]) -> dict[str, float]:
    """Mean and (population) variance over every number of a possibly jagged nested list.

    Raises ``ValueError`` when there is no number at all."""
    flat = _flatten(data)
    if not flat:
        raise ValueError("No numeric values found in data.")
    mean = sum(flat) / len(flat)
    var = sum(x * x for x in flat) / len(flat) - mean * mean
    return {"mean": mean, "var": var}


def compute_discounted_returns(rewards: Any, gamma: float) -> np.ndarray:
    """``G_t = r_t + gamma * G_{t+1}`` for a 1-D sequence of rewards."""
    r = np.asarray(rewards, dtype=np.float32) if not isinstance(rewards, np.ndarray) else rewards
    out = np.empty_like(r)
    running = 0.0
    for t in range(len(r) - 1, -1, -1):
        running = r[t] + gamma * running
        out[t] = running
    return out


def compute_grpo_process_supervision_advantages(
    rewards: Sequence[Sequence[number]], gamma: Optional[float] = None, std_tol: float = 1e-8
) -> list[np.ndarray]:
    """Per-step advantages of a group of trajectories (see the module docstring).

    Raises ``ValueError`` when the rewards' standard deviation is below ``std_tol``."""
    stats = compute_stats(rewards)
    std = max(stats["var"], 0.0) ** 0.5
    if std < std_tol:
        raise ValueError(f"`std` is smaller than tolerance of {std_tol}.")
    normed = [(np.asarray(traj, dtype=float) - stats["mean"]) / std for traj in rewards]
    if gamma is None:
        return [np.cumsum(traj[::-1])[::-1] for traj in normed]
    return [compute_discounted_returns(traj, gamma) for traj in normed]


__all__ = [
    "allclose_to_first",
    "compute_discounted_returns",
    "compute_grpo_process_supervision_advantages",
    "compute_stats",
]
