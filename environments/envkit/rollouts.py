"""The three steps most single-turn envs share: sample a group, ask for one greedy eval answer, log means.

    answers, nodes = await sample_group(self, messages)        # in collect_trajectories
    answer = await greedy_answer(self, messages)               # in evaluate
    metrics = drain_metrics(self, wandb_metrics, {"train/percent_correct": self.percent_correct_buffer})

``sample_group`` goes through ``managed_server`` so each node carries the exact token ids, masks and
logprobs the trainer needs; the completion budget keeps prompt + answer within ``max_token_length``.
Scoring and building the group stay in each env: that is what differs between them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Optional

from envkit.chat import completion_budget


async def sample_group(env: Any, messages: Sequence[dict[str, Any]]) -> tuple[list[str], list[Any]]:
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


async def greedy_answer(env: Any, messages: Sequence[dict[str, Any]]) -> str:
    """One temperature-0 answer for evaluation (the servers' eval limits apply: ``split="eval"``)."""
    completion = await env.server.chat_completion(
        messages=messages,
        n=1,
        temperature=0.0,
        split="eval",
        max_tokens=completion_budget(env.tokenizer, messages, env.config.max_token_length),
    )
    return completion.choices[0].message.content or ""


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


__all__ = ["drain_metrics", "greedy_answer", "sample_group"]
