"""Evaluation steps single-turn envs share: one greedy answer per test item, and reporting the result.

    async def score(item):
        return self.score(await greedy_answer(self, self.prompt(item)), item)

    scores = await evaluate_items(self, self.test, score)
    await report_eval(self, {"eval/percent_correct": sum(scores) / len(scores)}, task_name=self.name)

With ``--env.eval_n_samples n`` (n > 1) ``eval_answers`` samples n answers per item at
``--env.eval_temperature`` and ``sample_metrics`` turns the per-item scores into the metric's mean
(avg@n) and pass@k; with the default 1 it is one greedy answer and the plain mean, as before.

``evaluate_items`` (the runtime's) runs the items ``--env.max_eval_workers`` at a time and skips and
counts an item whose prompt leaves no room for an answer (``greedy_answer`` raises ``PromptTooLong``
for it): the scores are those of the items evaluated; ``metrics.json`` and the run's last line say
how many were skipped. Scoring stays in each env: that is what differs between them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from atroposlib.envkit.chat import completion_budget
from atroposlib.envkit.rollouts import SamplingEnv
from atroposlib.runtime.eval_items import evaluate_items
from atroposlib.runtime.eval_scores import sample_metrics


async def greedy_answer(env: SamplingEnv, messages: Sequence[dict[str, Any]]) -> str:
    """One temperature-0 answer for evaluation (the servers' eval limits apply: ``split="eval"``)."""
    completion = await env.server.chat_completion(
        messages=messages,
        n=1,
        temperature=0.0,
        split="eval",
        max_tokens=completion_budget(env.tokenizer, messages, env.config.max_token_length),
    )
    return completion.choices[0].message.content or ""


def eval_sampling(env: SamplingEnv) -> tuple[int, float]:
    """(answers per item, temperature) of this evaluation: one greedy answer unless
    ``eval_n_samples`` > 1."""
    n = int(getattr(env.config, "eval_n_samples", 1) or 1)
    return n, (float(getattr(env.config, "eval_temperature", 1.0)) if n > 1 else 0.0)


async def eval_answers(env: SamplingEnv, messages: Sequence[dict[str, Any]]) -> list[str]:
    """The evaluation answers to one item: ``greedy_answer`` alone, or ``eval_n_samples`` sampled
    at ``eval_temperature`` (the servers' eval limits apply)."""
    n, temperature = eval_sampling(env)
    if n == 1:
        return [await greedy_answer(env, messages)]
    completion = await env.server.chat_completion(
        messages=messages,
        n=n,
        temperature=temperature,
        split="eval",
        max_tokens=completion_budget(env.tokenizer, messages, env.config.max_token_length),
    )
    return [c.message.content or "" for c in completion.choices]


async def report_eval(env: Any, metrics: Mapping[str, float], **evaluate_log_args: Any) -> None:
    """Hand ``evaluate``'s results on: to ``env.eval_metrics`` (the next ``wandb_log`` logs them) and
    to ``env.evaluate_log`` with ``evaluate_log_args`` (metrics.json, samples, the printed table)."""
    env.eval_metrics.extend(metrics.items())
    await env.evaluate_log(dict(metrics), **evaluate_log_args)


__all__ = [
    "eval_answers",
    "eval_sampling",
    "evaluate_items",
    "greedy_answer",
    "report_eval",
    "sample_metrics",
]
