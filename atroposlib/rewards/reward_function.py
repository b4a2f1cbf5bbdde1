"""What a reward function is: the plain-function form and the class form (Atropos's ``RewardFunction``).

A plain reward function takes the completions of one group (strings) plus keyword context (e.g.
``answers=[...]``) and returns one float per completion; ``call_reward_fn`` calls one with the
context keys it accepts and checks the count. For the class form, subclass ``RewardFunction`` and
implement ``compute(completions, **kwargs) -> list[float]``; calling the instance applies
``weight``. ``FunctionReward`` wraps a plain function as a ``RewardFunction``. The registry
(``rewards.registry``) builds on this module; this module knows nothing of it.
"""

from __future__ import annotations

import inspect
import logging
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from typing import Any, Optional

logger = logging.getLogger(__name__)

RewardFn = Callable[..., list[float]]


def call_reward_fn(fn: RewardFn, completions: Sequence[str], **context: Any) -> list[float]:
    """Call ``fn`` with the context keys it accepts; check it returned one score per completion."""
    params = inspect.signature(fn).parameters
    if not any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        context = {k: v for k, v in context.items() if k in params}
    scores = [float(s) for s in fn(list(completions), **context)]
    if len(scores) != len(completions):
        raise ValueError(
            f"reward function {getattr(fn, '__name__', fn)} returned {len(scores)} scores "
            f"for {len(completions)} completions"
        )
    return scores


class RewardFunction(ABC):
    """A weighted reward over the completions of one group."""

    def __init__(self, weight: float = 1.0, name: Optional[str] = None, **kwargs: Any) -> None:
        self.weight = weight
        self._name = name
        self.config = kwargs
        self.wandb_logger: Any = None
        self.failures = 0  # calls whose compute() raised (each scored 0.0)

    @property
    def name(self) -> str:
        return self._name or type(self).__name__.lower()

    @abstractmethod
    def compute(self, completions: list[Any], **kwargs: Any) -> list[float]:
        """One raw score per completion."""

    def __call__(self, completions: list[Any], **kwargs: Any) -> list[float]:
        """``weight * compute(...)``. As in Atropos, a failing reward scores 0.0 for every
        completion. Never silent, never a flood: the first failure is logged with its traceback,
        then one line at every power of two of the count (``failures``)."""
        try:
            raw = [float(r) for r in self.compute(completions, **kwargs)]
        except Exception as e:
            self.failures += 1
            if self.failures == 1:
                logger.exception("reward function %s failed; scoring 0.0", self.name)
            elif self.failures & (self.failures - 1) == 0:
                logger.warning(
                    "reward function %s has failed %d times (scored 0.0 each); latest: %s: %s",
                    self.name,
                    self.failures,
                    type(e).__name__,
                    e,
                )
            return [0.0] * len(completions)
        weighted = [r * self.weight for r in raw]
        if self.wandb_logger is not None:
            self.log_metrics(raw, weighted)
        return weighted

    def set_wandb_logger(self, logger: Any) -> None:
        self.wandb_logger = logger

    def log_metrics(self, raw_rewards: list[float], weighted_rewards: list[float]) -> None:
        if not self.wandb_logger or not raw_rewards:
            return
        n = len(raw_rewards)
        self.wandb_logger.log(
            {
                f"reward/{self.name}/mean_raw": sum(raw_rewards) / n,
                f"reward/{self.name}/mean_weighted": sum(weighted_rewards) / n,
                f"reward/{self.name}/min": min(raw_rewards),
                f"reward/{self.name}/max": max(raw_rewards),
            }
        )

    @staticmethod
    def get_content(completion: Any) -> str:
        """The assistant text of a completion given as a string, an assistant message, a
        ``{"message": {...}}`` choice, or a list of messages ("" when there is none)."""
        if isinstance(completion, str):
            return completion
        if isinstance(completion, dict):
            msg = completion.get("message") if "message" in completion else completion
            if isinstance(msg, dict) and msg.get("role") == "assistant" and "content" in msg:
                return msg["content"]
        if isinstance(completion, list):
            for msg in completion:
                if isinstance(msg, dict) and msg.get("role") == "assistant" and "content" in msg:
                    return msg["content"]
        return ""


class FunctionReward(RewardFunction):
    """A registered plain reward function as a ``RewardFunction`` (its ``params`` bound)."""

    def __init__(self, fn: RewardFn, weight: float = 1.0, **params: Any) -> None:
        name = params.pop("name", None) or getattr(fn, "__name__", "reward")
        super().__init__(weight=weight, name=name, **params)
        self.fn = fn

    def compute(self, completions: list[Any], **kwargs: Any) -> list[float]:
        texts = [self.get_content(c) for c in completions]
        return call_reward_fn(self.fn, texts, **{**self.config, **kwargs})


__all__ = ["FunctionReward", "RewardFn", "RewardFunction", "call_reward_fn"]
