"""``TrainingRun``: what set-up builds and the loop turns: the models, the optimizer, the step, and the
collaborators each step calls (the API feed, the report, the weight publisher, the checkpointer).

Every collaborator is there on every rank; where a rank has nothing to do (the other ranks of a
``torchrun`` run talk to no API and log no row) it holds a null one, so the loop reads the same on all.
``ResumeSettling``: the first batch a ``--resume``d trainer trains settles its step against the API's
(``resume.settle_resume``); without ``--resume`` it leaves the step as it is.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

import torch

from example_trainer.batch_feed import BatchFeed
from example_trainer.config import TrainingConfig
from example_trainer.distributed import DistInfo, shutdown
from example_trainer.resume import settle_resume
from example_trainer.step_outputs import Checkpointer, WeightPublisher
from example_trainer.step_report import SilentReport
from example_trainer.step_timing import StepTimer


class ResumeSettling:
    """Once, at the first batch a resumed trainer trains: the step it continues from (see the module
    docstring); afterwards, and without ``--resume``, the step unchanged."""

    def __init__(
        self, active: bool, checkpointed: bool, interval: int, report: SilentReport
    ) -> None:
        self.active = active
        self.checkpointed = checkpointed  # whether the run resumed from a checkpoint at all
        self.interval = interval
        self.report = report

    def settle(self, step: int, batch_step: Optional[int]) -> int:
        if not self.active:
            return step
        self.active = False
        return settle_resume(
            step,
            batch_step,
            checkpointed=self.checkpointed,
            interval=self.interval,
            metrics=self.report.metrics,
        )


@dataclass
class TrainingRun:
    """One trainer process's run (see the module docstring)."""

    cfg: TrainingConfig
    info: DistInfo
    device: torch.device
    model: torch.nn.Module  # wrapped for DDP/FSDP under torchrun
    ref_model: Optional[torch.nn.Module]  # the frozen KL reference, when kl_coef > 0
    tokenizer: Any
    pad_id: int
    share_prefix: bool  # sequences sharing a prompt run it once (prefix_packing.py)
    optimizer: torch.optim.Optimizer
    scheduler: torch.optim.lr_scheduler.LambdaLR
    shuffle_gen: Optional[torch.Generator]  # --control shuffled: permutes scores within groups
    timer: StepTimer
    feed: BatchFeed
    report: SilentReport
    publisher: WeightPublisher
    checkpointer: Checkpointer
    resume: ResumeSettling
    step: int = 0

    def close(self) -> None:
        """Rank 0: stop the weight refresh, close the metrics and the API client; then every rank
        leaves its process group."""
        self.publisher.close()
        self.report.close()
        self.feed.close()
        shutdown(self.info)


__all__ = ["ResumeSettling", "TrainingRun"]
