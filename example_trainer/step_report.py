"""What each trainer step tells the user: rank 0's metrics row and progress line; the other ranks, nothing.

``StepReport`` (rank 0) builds the step's row from ``metrics.step_metrics``, the weight refresh's
figures, the staleness figures (``staleness.py``: it asks the API's ``/status`` each step) and the time
breakdown with its FLOPs estimate (``step_timing.py``, ``flops.py``); writes it to ``metrics.jsonl``
(and wandb when enabled: ``metrics.MetricsLogger``) and prints the compact progress line. It also says,
once per kind, what a batch lost on its way into the trainer (``metrics.note_batch``). ``SilentReport``
stands in on the other ranks of a ``torchrun`` run.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Optional

from example_trainer.flops import ModelCost, step_flops
from example_trainer.metrics import MetricsLogger, format_step_line, note_batch, step_metrics
from example_trainer.staleness import StalenessReport
from example_trainer.step_timing import StepTimer

if TYPE_CHECKING:
    from example_trainer.batching import FlatBatch


@dataclass(frozen=True)
class StepResult:
    """One trained step, as its metrics row reads it."""

    step: int
    flat: FlatBatch  # the batch's sequences, as trained
    stats: dict[str, float]  # train_step's sums
    grad_norm: float
    lr: float
    step_time: float  # from the batch's preparation to the schedule's step
    wait_time: float  # waiting for the batch
    published: dict[str, Any]  # the weight refresh's figures (empty when none ran this step)


class SilentReport:
    """The other ranks: no row, no line (rank 0 reports for the run)."""

    def __init__(self) -> None:
        # the metrics file a resumed run trims to the step it continues from (resume.settle_resume)
        self.metrics: Optional[MetricsLogger] = None

    def note_batch(self, flat: FlatBatch) -> None:
        """Say what the batch lost on the way in (truncation, missing teacher data)."""

    def log_step(self, result: StepResult) -> None:
        """Write the step's metrics row and print its progress line."""

    def close(self) -> None:
        """Close the metrics file (and the wandb run)."""


class StepReport(SilentReport):
    """Rank 0's report of each step (see the module docstring)."""

    def __init__(
        self,
        metrics: MetricsLogger,
        staleness: StalenessReport,
        timer: StepTimer,
        cost: ModelCost,
        total_steps: int,
        seq_len: int,
    ) -> None:
        super().__init__()
        self.metrics = metrics
        self._logger = metrics
        self.staleness = staleness
        self.timer = timer
        self.cost = cost  # matmul weights, for each step's FLOPs estimate
        self.total_steps = total_steps
        self.seq_len = seq_len

    def note_batch(self, flat: FlatBatch) -> None:
        note_batch(flat, self.seq_len)

    def log_step(self, result: StepResult) -> None:
        r = result
        m = step_metrics(r.step, r.flat, r.stats, r.grad_norm, r.lr, r.step_time, r.wait_time)
        m.update(r.published)
        m.update(self.staleness.step_metrics(r.step, m))
        m.update(timing_fields(self.timer, self.cost, r.stats))
        self._logger.log(m)
        print(format_step_line(m, self.total_steps), flush=True)

    def close(self) -> None:
        self._logger.close()


def timing_fields(timer: StepTimer, cost: ModelCost, stats: dict[str, float]) -> dict[str, float]:
    """The step's time breakdown (``step_timing.py``) and its estimated arithmetic (``flops.py``):
    ``train_tflop`` for forward + backward of the whole batch, ``train_tflop_per_s`` over their time."""
    row = timer.row()
    flop = step_flops(
        cost,
        stats.get("padded_tokens", 0.0),
        stats.get("padded_square_sum", 0.0),
        head_tokens=stats.get("head_tokens"),
    )
    compute_s = row["time_forward_s"] + row["time_backward_s"]
    row["train_tflop"] = flop / 1e12
    row["train_tflop_per_s"] = flop / compute_s / 1e12 if compute_s > 0 else 0.0
    return row


__all__ = ["SilentReport", "StepReport", "StepResult", "timing_fields"]
