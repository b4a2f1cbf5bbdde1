"""Sampling a group for training: ``sample_group``, the config it reads, and what an env returns.

    async def collect_trajectories(self, item: Item) -> Trajectories:
        answers, nodes = await sample_group(self, messages)
    metrics = drain_metrics(self, wandb_metrics, {"train/percent_correct": self.percent_correct_buffer})

``sample_group`` goes through ``managed_server`` so each node carries the exact token ids, masks and
logprobs the trainer needs; the completion budget keeps prompt + answer within ``max_token_length``.
Scoring and building the group stay in each env: that is what differs between them.

What ``sample_group`` (and ``evaluation.greedy_answer``) need of an env is typed (``SamplingEnv``):
its config must declare ``temperature``; an env config that samples inherits ``SamplingConfig`` (a
``BaseEnvConfig`` with ``temperature``) and may redeclare the field with its own default or
description.

Metrics: envs report with ``self.add_metric(name, value)`` (``BaseEnv``; the base ``wandb_log`` logs
the means and what ``evaluate`` left in ``eval_metrics``). ``drain_metrics`` stays for env files
that keep their own buffers and override ``wandb_log``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Optional, Protocol

from pydantic import Field

from atroposlib.envkit.chat import completion_budget
from atroposlib.envs.base import BaseEnvConfig, Item
from atroposlib.groups import Group

# What ``collect_trajectories`` returns: the item's group (a ``GroupBuilder.build()`` model or a
# ``ScoredDataGroup`` dict; None: nothing to send) and items to come back to later (the backlog).
Trajectories = tuple[Optional[Group], list[Item]]


class SamplingConfig(BaseEnvConfig):
    """``BaseEnvConfig`` plus the sampling temperature ``sample_group`` uses."""

    temperature: float = Field(default=1.0, ge=0.0, description="Sampling temperature.")


class SamplingSettings(Protocol):
    """The config fields ``sample_group`` / ``greedy_answer`` read."""

    group_size: int
    temperature: float
    max_token_length: int


class SamplingEnv(Protocol):
    """What ``sample_group`` / ``greedy_answer`` use of an env (a ``BaseEnv`` whose config samples)."""

    @property
    def config(self) -> SamplingSettings: ...

    @property
    def server(self) -> Any: ...

    @property
    def tokenizer(self) -> Any: ...


async def sample_group(
    env: SamplingEnv, messages: Sequence[dict[str, Any]]
) -> tuple[list[str], list[Any]]:
    """``env.config.group_size`` answers to ``messages`` at ``env.config.temperature``, with their tracked
    nodes (same order). A missing answer text is ''."""
    async with env.server.managed_server(tokenizer=env.tokenizer) as managed:
        completion = await managed.chat_completion(
            messages=messages,
            n=env.config.group_size,
            temperature=env.config.temperature,
            max_tokens=completion_budget(env.tokenizer, messages, env.config.max_token_length),
        )
        nodes = managed.get_state()["nodes"]
    return [choice.message.content or "" for choice in completion.choices], nodes


def drain_metrics(
    env: Any, wandb_metrics: Optional[Mapping[str, Any]], buffers: Mapping[str, list[float]]
) -> dict[str, Any]:
    """For ``wandb_log``: ``wandb_metrics`` plus the mean of each non-empty buffer under its key, plus the
    ``(name, value)`` pairs ``evaluate`` left in ``env.eval_metrics``. Empties the buffers and eval_metrics."""
    metrics = dict(wandb_metrics or {})
    for key, values in buffers.items():
        if values:
            metrics[key] = sum(values) / len(values)
        values.clear()
    metrics.update(dict(env.eval_metrics))
    env.eval_metrics = []
    return metrics


__all__ = [
    "SamplingConfig",
    "SamplingEnv",
    "SamplingSettings",
    "Trajectories",
    "drain_metrics",
    "sample_group",
]
