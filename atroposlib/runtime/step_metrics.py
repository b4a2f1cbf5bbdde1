"""What an env's ``wandb_log`` logs, and the rollout table it includes.

``log_step_metrics`` (``BaseEnv.wandb_log``) gathers, for one step: the means of ``add_metric``
values and every ``set_metric`` gauge, the ``(name, value)`` pairs ``evaluate()`` left in
``eval_metrics``, what the env passed in, completion lengths, groups dropped by reason, the rollout
table (the env's ``create_rollout_table``, which Atropos env files override), the inference
servers' metrics (with what the managed sessions counted) and the samples left without a score; prefixes them with the env's wandb name and sends them to the run's metrics sink.
The per-step buffers are emptied.

``keep_rollouts`` / ``rollout_table`` are the default ``add_rollouts_for_wandb`` /
``create_rollout_table``: a few decoded rollouts per group, the latest ``num_rollouts_to_keep``.
"""

from __future__ import annotations

from typing import Any, Optional

from atroposlib.runtime.config import BaseEnvConfig
from atroposlib.runtime.context import EnvRuntime, Rollout, RunContext, TokenDecoder
from atroposlib.type_definitions import ScoredDataGroup


def keep_rollouts(
    context: RunContext, config: BaseEnvConfig, tokenizer: TokenDecoder, group: ScoredDataGroup
) -> None:
    """Keep ``num_rollouts_per_group_for_logging`` decoded rollouts of ``group`` (-1: all) for the
    rollout table, and only the latest ``num_rollouts_to_keep`` groups of them."""
    n = len(group["tokens"])
    keep = config.num_rollouts_per_group_for_logging
    keep = n if keep == -1 else min(keep, n)
    rows: list[Rollout] = [
        (tokenizer.decode(group["tokens"][i]), group["scores"][i]) for i in range(keep)
    ]
    context.rollouts_for_wandb.append(rows)
    while len(context.rollouts_for_wandb) > config.num_rollouts_to_keep:
        context.rollouts_for_wandb.pop(0)


def rollout_table(context: RunContext, wandb_metrics: dict[str, Any]) -> dict[str, Any]:
    """Add the kept rollouts to ``wandb_metrics`` as ``train/rollouts`` (when the sink makes tables)."""
    rows = [tuple(row) for group in context.rollouts_for_wandb for row in group]
    width = max((len(r) for r in rows), default=2)
    columns = ["text", "score"] + [f"extra_{i}" for i in range(2, width)]
    rows = [r + (None,) * (width - len(r)) for r in rows]
    table = context.metrics_logger.table(columns, rows) if rows else None
    if table is not None:
        wandb_metrics["train/rollouts"] = table
    return wandb_metrics


async def log_step_metrics(env: EnvRuntime, wandb_metrics: Optional[dict[str, Any]] = None) -> None:
    """Log one step's metrics (see the module docstring)."""
    ctx = env.context
    metrics = ctx.metrics.drain()
    metrics.update(dict(ctx.eval_metrics))  # what evaluate() left (Atropos's convention)
    ctx.eval_metrics = []
    metrics.update(wandb_metrics or {})
    if ctx.completion_lengths:
        metrics["train/completion_lengths"] = sum(ctx.completion_lengths) / len(
            ctx.completion_lengths
        )
        metrics["train/completion_lengths_max"] = max(ctx.completion_lengths)
    for reason, count in ctx.drop_counts.items():
        metrics[f"train/groups_dropped_{reason}"] = count
    metrics = await env.create_rollout_table(metrics)
    metrics.update(await env.server.wandb_metrics())
    if ctx.scorer is not None:
        metrics.update(ctx.scorer.metrics())
    ctx.rollouts_for_wandb, ctx.completion_lengths = [], []
    if ctx.wandb_prepend:
        metrics = {f"{ctx.wandb_prepend}_{k}": v for k, v in metrics.items()}
    ctx.metrics_logger.log(metrics, step=ctx.curr_step)


__all__ = ["keep_rollouts", "log_step_metrics", "rollout_table"]
