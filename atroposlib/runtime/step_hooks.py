"""What ``serve`` does when the trainer's step advances: scheduled evals, env checkpoints, metrics.

Every ``steps_per_eval`` steps ``evaluate()`` starts (not twice at once); every checkpoint interval
set by the trainer ``save_checkpoint(step)`` runs; after ``min_items_sent_before_logging`` groups the
env's ``wandb_log`` gets the runner's counters. A hook that raises is logged and counted in
``counts["hook_errors"]``.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Optional

from atroposlib.runtime.context import EnvRuntime
from atroposlib.runtime.eval_tally import EvalTally
from atroposlib.runtime.step_metrics import log_metrics

logger = logging.getLogger(__name__)


class StepHooks:
    """Runs the per-step hooks of ``env``; ``counts`` are the runner's counters (``hook_errors``
    is incremented here, ``timeouts`` is logged), ``spooled`` says how many groups wait to be sent."""

    def __init__(self, env: EnvRuntime, counts: dict[str, int], spooled: Callable[[], int]) -> None:
        self.env = env
        self.counts = counts
        self.spooled = spooled
        self.eval_task: Optional[asyncio.Task[None]] = None

    def eval_running(self) -> bool:
        return self.eval_task is not None and not self.eval_task.done()

    def cancel_eval(self) -> None:
        if self.eval_running() and self.eval_task is not None:
            self.eval_task.cancel()

    async def on_new_step(self, new_step: int) -> None:
        """A new trainer step: start an eval, save a checkpoint, log metrics, when they are due."""
        env, cfg, ctx = self.env, self.env.config, self.env.context
        old = ctx.curr_step
        if new_step == old:
            return
        if cfg.steps_per_eval > 0 and new_step // cfg.steps_per_eval > old // cfg.steps_per_eval:
            if self.eval_running():
                logger.warning(
                    "previous eval still running; skipping the eval at step %d", new_step
                )
            else:
                self.eval_task = asyncio.create_task(self.run_eval())
        interval = ctx.checkpoint_interval
        if interval and interval > 0 and new_step // interval > old // interval:
            try:
                env.save_checkpoint((new_step // interval) * interval)
            except Exception:
                self.counts["hook_errors"] += 1
                logger.exception("save_checkpoint() raised")
        ctx.curr_step = new_step
        if ctx.items_sent_this_step >= cfg.min_items_sent_before_logging:
            ctx.items_sent_this_step = 0
            try:
                await log_metrics(
                    env,
                    {
                        "train/hook_errors": self.counts["hook_errors"],
                        "train/timed_out_items": self.counts["timeouts"],
                        "train/spooled_groups": self.spooled(),
                    },
                )
            except Exception:
                self.counts["hook_errors"] += 1
                logger.exception("wandb_log() raised")

    async def run_eval(self) -> None:
        self.env.context.eval_tally = EvalTally()  # this evaluation's items only
        try:
            await self.env.evaluate()
        except Exception:
            self.counts["hook_errors"] += 1
            logger.exception("evaluate() raised")


__all__ = ["StepHooks"]
