"""What ``serve`` does when the trainer's step advances: scheduled evals, env checkpoints, metrics.

Every ``steps_per_eval`` steps ``evaluate()`` starts (not twice at once); every checkpoint interval
set by the trainer ``save_checkpoint(step)`` runs; after ``min_items_sent_before_logging`` groups the
env's ``wandb_log`` gets the runner's counters. A hook that raises is logged and counted.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the runner imports this module
    from atroposlib.envs.runner import ServeRunner

logger = logging.getLogger(__name__)


async def on_new_step(runner: ServeRunner, new_step: int) -> None:
    """A new trainer step: start an eval, save a checkpoint, log metrics, when they are due."""
    env, cfg = runner.env, runner.cfg
    old = env.curr_step
    if new_step == old:
        return
    if cfg.steps_per_eval > 0 and new_step // cfg.steps_per_eval > old // cfg.steps_per_eval:
        if runner._eval_running():
            logger.warning("previous eval still running; skipping the eval at step %d", new_step)
        else:
            runner.eval_task = asyncio.create_task(run_eval(runner))
    if (
        env.checkpoint_interval
        and env.checkpoint_interval > 0
        and new_step // env.checkpoint_interval > old // env.checkpoint_interval
    ):
        try:
            env.save_checkpoint((new_step // env.checkpoint_interval) * env.checkpoint_interval)
        except Exception:
            runner.counts["hook_errors"] += 1
            logger.exception("save_checkpoint() raised")
    env.curr_step = new_step
    if env.items_sent_this_step >= cfg.min_items_sent_before_logging:
        env.items_sent_this_step = 0
        try:
            await env.wandb_log(
                {
                    "train/hook_errors": runner.counts["hook_errors"],
                    "train/timed_out_items": runner.counts["timeouts"],
                    "train/spooled_groups": runner.spool.pending(),
                }
            )
        except Exception:
            runner.counts["hook_errors"] += 1
            logger.exception("wandb_log() raised")


async def run_eval(runner: ServeRunner) -> None:
    try:
        await runner.env.evaluate()
    except Exception:
        runner.counts["hook_errors"] += 1
        logger.exception("evaluate() raised")


__all__ = ["on_new_step", "run_eval"]
