"""``CombinedReward`` (Atropos's name): several reward functions summed, optionally normalised."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any, Union

from atroposlib.rewards.registry import registry
from atroposlib.rewards.reward_function import RewardFunction

logger = logging.getLogger(__name__)

NORMALIZATIONS = ("none", "sum", "minmax")


class CombinedReward(RewardFunction):
    """Sum of the weighted sub-rewards built from ``rewards`` (names or ``{"type", "weight",
    "params"}`` specs). ``normalization``: ``none``; ``sum`` divides by the sum of the weights;
    ``minmax`` rescales the group's totals to [0, 1]."""

    def __init__(
        self,
        rewards: Sequence[Union[str, Mapping[str, Any], RewardFunction]],
        normalization: str = "none",
        weight: float = 1.0,
        **kwargs: Any,
    ) -> None:
        super().__init__(weight=weight, **kwargs)
        if normalization not in NORMALIZATIONS:
            raise ValueError(
                f"normalization must be one of {NORMALIZATIONS}, got {normalization!r}"
            )
        if not rewards:
            raise ValueError("CombinedReward needs at least one reward function")
        self.normalization = normalization
        self.reward_functions = [
            r if isinstance(r, RewardFunction) else registry.create(r) for r in rewards
        ]

    @property
    def name(self) -> str:
        return f"combined({','.join(r.name for r in self.reward_functions)})"

    def set_wandb_logger(self, logger: Any) -> None:
        super().set_wandb_logger(logger)
        for r in self.reward_functions:
            r.set_wandb_logger(logger)

    def compute(self, completions: list[Any], **kwargs: Any) -> list[float]:
        if not completions:
            return []
        total = [0.0] * len(completions)
        for fn in self.reward_functions:
            for i, score in enumerate(fn(completions, **kwargs)):  # weighted by fn.weight
                total[i] += score
        if self.normalization == "sum":
            weights = sum(r.weight for r in self.reward_functions)
            if weights > 0:
                total = [t / weights for t in total]
        elif self.normalization == "minmax":
            lo, hi = min(total), max(total)
            if hi > lo:
                total = [(t - lo) / (hi - lo) for t in total]
        return total


__all__ = ["CombinedReward"]
