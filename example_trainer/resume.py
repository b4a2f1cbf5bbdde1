"""``--resume``: put a checkpoint's optimizer, scheduler and RNG state back into a fresh trainer, and
settle the step it continues from against the API.

The weights come back when the policy is loaded from the checkpoint folder (``model_setup``); this
restores the rest. Under FSDP the checkpoint holds the gathered ("full") optimizer state and every
rank takes its shard; a checkpoint written under another ``--parallel`` setting restores everything
but the optimizer moments (with a warning), since their layout differs.

A batch is acknowledged after its step's checkpoint only when a checkpoint is due at that step
(``checkpoint_interval``); the API never delivers an acknowledged batch again. So with an interval
above 1 (or 0: only at the end) a trainer that died may have had batches acknowledged after its last
checkpoint. The first batch a resumed trainer trains carries the API's step (``settle_resume``): the
trainer continues at the API's step, says in one line how many acknowledged batches the model lacks,
and drops its metrics rows of the steps it trains again, so ``metrics.jsonl`` holds each step once.
With ``checkpoint_interval=1`` nothing is ever lacking.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Optional

import torch

if TYPE_CHECKING:
    from example_trainer.metrics import MetricsLogger

from example_trainer.checkpoint import Checkpoint, set_rng_state
from example_trainer.distributed import load_full_optimizer_state

log = logging.getLogger(__name__)


def restore_training_state(
    ckpt: Checkpoint,
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    scheduler: torch.optim.lr_scheduler.LRScheduler,
    *,
    sharded: bool,
) -> int:
    """Restore ``ckpt``'s optimizer (``sharded``: FSDP), scheduler and RNG state; returns its step."""
    full_optimizer = ckpt.state.get("optimizer_format") == "full"
    if sharded and full_optimizer:  # every rank takes its shard of the gathered optimizer state
        load_full_optimizer_state(model, optimizer, ckpt.state["optimizer"])
    elif sharded or full_optimizer:
        log.warning(
            "resume: optimizer moments are not restored (checkpoint written with another "
            "--parallel setting)"
        )
    else:
        optimizer.load_state_dict(ckpt.state["optimizer"])
    if ckpt.state.get("scheduler"):
        scheduler.load_state_dict(ckpt.state["scheduler"])
    set_rng_state(ckpt.state["rng"])
    log.info("resumed from %s at step %d", ckpt.path, ckpt.step)
    return ckpt.step


def settle_resume(
    step: int,
    batch_step: Optional[int],
    *,
    checkpointed: bool,
    interval: int,
    metrics: Optional[MetricsLogger],
) -> int:
    """The step a resumed trainer continues from, given its checkpoint's ``step`` and the API's step
    of the first batch it will train (``batch_step``; batches are numbered one after another, so
    those before it were acknowledged). Logs one line when acknowledged batches are not in the
    model; keeps the metrics rows up to the returned step."""
    acked = batch_step - 1 if batch_step is not None else step
    if acked > step:
        since = f"checkpoint step {step}" if checkpointed else "no checkpoint (the initial weights)"
        steps = f"step {acked}" if acked == step + 1 else f"steps {step + 1}-{acked}"
        log.warning(
            "resume: %d batch(es) acknowledged after %s (%s) are not in the model "
            "(checkpoint_interval %d; 1 makes every resume exact); continuing at step %d",
            acked - step,
            since,
            steps,
            interval,
            acked,
        )
    new = max(step, acked)
    if metrics is not None:
        metrics.keep_through(new)
    return new
