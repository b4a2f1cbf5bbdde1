"""What leaves the trainer after a step, and when: the weights to the inference servers, checkpoints to disk.

``WeightPublisher``: every ``vllm_restart_interval`` steps and at the last step, the weights go to the
inference servers through the run's ``WeightRefresh`` (``weight_refresh.py``, ``refresh_modes.py``:
restart | reload | lora | nccl | none); the refresh's figures go into that step's metrics row.
``Checkpointer``: every ``checkpoint_interval`` steps a resumable checkpoint (``checkpoint.py``: model,
optimizer, scheduler, RNG, step), and one at the end unless the last step wrote it. Under FSDP every
rank joins the gathers of the full weights (and optimizer state); rank 0 alone pushes and writes.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

import torch

from example_trainer.checkpoint import save_checkpoint
from example_trainer.config import TrainingConfig
from example_trainer.distributed import (
    DistInfo,
    full_model_state_dict,
    full_optimizer_state_dict,
    unwrap,
)
from example_trainer.step_timing import StepTimer
from example_trainer.weight_refresh import WeightRefresh


def _full_state_dict(
    model: torch.nn.Module, cfg: TrainingConfig, info: DistInfo
) -> Optional[dict[str, Any]]:
    """FSDP: the gathered full weights (a collective every rank joins); otherwise None."""
    return full_model_state_dict(model) if info.enabled and cfg.parallel == "fsdp" else None


def publish(
    refresher: WeightRefresh,
    model: torch.nn.Module,
    tokenizer: Any,
    step: int,
    cfg: TrainingConfig,
    info: DistInfo,
) -> dict[str, Any]:
    """Push the current weights to the inference server (rank 0 only); every rank joins the gather."""
    sd = _full_state_dict(model, cfg, info)
    return refresher.refresh(step, unwrap(model), tokenizer, state_dict=sd) if info.is_main else {}


def checkpoint(
    model: torch.nn.Module,
    tokenizer: Any,
    optimizer: torch.optim.Optimizer,
    scheduler: torch.optim.lr_scheduler.LRScheduler,
    step: int,
    cfg: TrainingConfig,
    info: DistInfo,
) -> None:
    # FSDP: every rank joins the gathers of the full weights and of the full optimizer state
    sd = _full_state_dict(model, cfg, info)
    optim_sd = (
        full_optimizer_state_dict(model, optimizer)
        if info.enabled and cfg.parallel == "fsdp"
        else None
    )
    if info.is_main:
        save_checkpoint(
            Path(cfg.save_path),
            step,
            model=unwrap(model),
            tokenizer=tokenizer,
            optimizer=optimizer,
            scheduler=scheduler,
            extra={"config": cfg.model_dump()},
            keep=cfg.keep_checkpoints,
            state_dict=sd,
            optimizer_state=optim_sd,
        )


@dataclass
class _StepOutput:
    """What both outputs work on: the (wrapped) model and its tokenizer, on this rank, timed per step."""

    model: torch.nn.Module
    tokenizer: Any
    cfg: TrainingConfig
    info: DistInfo
    timer: StepTimer


@dataclass
class WeightPublisher(_StepOutput):
    """The weight refresh on its schedule; see the module docstring."""

    refresher: WeightRefresh

    def after_step(self, step: int) -> dict[str, Any]:
        """Publish when ``step`` is due (charged to its ``publish`` phase); the refresh's figures for
        the step's row, empty when nothing was published."""
        if step % self.cfg.vllm_restart_interval and step != self.cfg.training_steps:
            return {}
        with self.timer.phase("publish"):
            return publish(self.refresher, self.model, self.tokenizer, step, self.cfg, self.info)

    def close(self) -> None:
        """Rank 0: release what the refresh's ``start`` acquired (e.g. a server it launched)."""
        if self.info.is_main:
            self.refresher.close()


@dataclass
class Checkpointer(_StepOutput):
    """Resumable checkpoints on their schedule; see the module docstring."""

    optimizer: torch.optim.Optimizer
    scheduler: torch.optim.lr_scheduler.LRScheduler

    def due(self, step: int) -> bool:
        """Whether ``checkpoint_interval`` asks for a checkpoint at ``step``."""
        return bool(self.cfg.checkpoint_interval) and step % self.cfg.checkpoint_interval == 0

    def save(self, step: int) -> None:
        checkpoint(
            self.model, self.tokenizer, self.optimizer, self.scheduler, step, self.cfg, self.info
        )

    def after_step(self, step: int) -> None:
        """The checkpoint of ``step`` when it is due (charged to its ``checkpoint`` phase)."""
        if self.due(step):
            with self.timer.phase("checkpoint"):
                self.save(step)

    def at_end(self, step: int) -> None:
        """The run's last checkpoint, unless ``after_step`` wrote it."""
        if not self.due(step):
            self.save(step)


__all__ = ["Checkpointer", "WeightPublisher", "checkpoint", "publish"]
