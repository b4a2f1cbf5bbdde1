"""``--resume``: put a checkpoint's optimizer, scheduler and RNG state back into a fresh trainer.

The weights come back when the policy is loaded from the checkpoint folder (``model_setup``); this
restores the rest. Under FSDP the checkpoint holds the gathered ("full") optimizer state and every
rank takes its shard; a checkpoint written under another ``--parallel`` setting restores everything
but the optimizer moments (with a warning), since their layout differs.
"""

from __future__ import annotations

import logging

import torch

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
