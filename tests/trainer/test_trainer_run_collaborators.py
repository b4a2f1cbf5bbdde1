"""The collaborators the trainer's loop calls each step: when weights are published and checkpoints
written, what the other ranks' null feed and report do, and that resume settling happens once."""

from __future__ import annotations

import pytest
import torch

from example_trainer.batch_feed import ApiBatchFeed, BatchFeed, Delivery
from example_trainer.config import TrainingConfig
from example_trainer.distributed import DistInfo
from example_trainer.step_outputs import Checkpointer, WeightPublisher
from example_trainer.step_report import SilentReport
from example_trainer.step_timing import StepTimer
from example_trainer.training_run import ResumeSettling
from example_trainer.weight_refresh import WeightRefresh


def _cfg(**kw) -> TrainingConfig:
    return TrainingConfig(model_name="m", **kw)


class _Recording(WeightRefresh):
    def __init__(self, cfg: TrainingConfig) -> None:
        super().__init__(cfg)
        self.refreshed: list[int] = []
        self.closed = False

    def refresh(self, step, model, tokenizer, state_dict=None):
        self.refreshed.append(step)
        return {"policy_version": step}

    def close(self) -> None:
        self.closed = True


def test_weights_are_published_every_interval_and_at_the_last_step():
    cfg = _cfg(vllm_restart_interval=3, training_steps=7)
    timer = StepTimer()
    refresher = _Recording(cfg)
    publisher = WeightPublisher(torch.nn.Linear(2, 2), None, cfg, DistInfo(), timer, refresher)
    rows = {step: publisher.after_step(step) for step in range(1, 8)}
    assert refresher.refreshed == [3, 6, 7]
    assert rows[3] == {"policy_version": 3} and rows[4] == {}
    assert timer.row()["time_publish_s"] > 0


def test_only_rank_zero_closes_the_weight_refresh():
    cfg = _cfg()
    for rank, closes in ((0, True), (1, False)):
        refresher = _Recording(cfg)
        info = DistInfo(rank=rank, world_size=2)
        WeightPublisher(torch.nn.Linear(2, 2), None, cfg, info, StepTimer(), refresher).close()
        assert refresher.closed is closes


@pytest.mark.parametrize(
    ("interval", "last", "saved_after_steps", "saved_at_end"),
    [(0, 5, [], [5]), (2, 5, [2, 4], [5]), (2, 4, [2, 4], []), (1, 3, [1, 2, 3], [])],
)
def test_checkpoints_every_interval_and_one_at_the_end_unless_the_last_step_wrote_it(
    interval, last, saved_after_steps, saved_at_end
):
    cfg = _cfg(checkpoint_interval=interval)
    saved: list[int] = []
    ckpt = Checkpointer(None, None, cfg, DistInfo(), StepTimer(), None, None)  # type: ignore[arg-type]
    ckpt.save = saved.append  # type: ignore[method-assign]
    for step in range(1, last + 1):
        ckpt.after_step(step)
    assert saved == saved_after_steps
    ckpt.at_end(last)
    assert saved == saved_after_steps + saved_at_end


def test_a_redelivered_batch_is_one_the_weights_already_hold():
    assert Delivery([], "b", 3).already_trained(3)
    assert not Delivery([], "b", 4).already_trained(3)
    assert not Delivery([], None, None).already_trained(3)  # an API that numbers no steps


def test_the_other_ranks_feed_and_report_do_nothing_but_receive():
    feed = BatchFeed(DistInfo())  # one process: the broadcast hands back what it was given
    assert feed.receive() == Delivery(None, None, None)  # type: ignore[arg-type]
    feed.ack(Delivery([], "b", 1))
    feed.ack_redelivered(Delivery([], "b", 1))
    feed.close()
    report = SilentReport()
    assert report.metrics is None


class _Client:
    def __init__(self) -> None:
        self.acked: list[str] = []

    def ack_batch(self, batch_id: str) -> None:
        self.acked.append(batch_id)


def test_rank_zero_acks_batches_that_carry_an_id_and_times_the_step_ack():
    client, timer = _Client(), StepTimer()
    feed = ApiBatchFeed(client, _cfg(), DistInfo(), timer)  # type: ignore[arg-type]
    feed.ack(Delivery([], None, None))  # Atropos's own API sends no id: nothing to acknowledge
    assert client.acked == [] and timer.row()["time_ack_s"] == 0.0
    feed.ack(Delivery([], "b1", 1))
    feed.ack_redelivered(Delivery([], "b0", 0))
    assert client.acked == ["b1", "b0"]
    assert timer.row()["time_ack_s"] > 0


def test_resume_settles_the_step_once_and_not_at_all_without_resume(tmp_path):
    from example_trainer.metrics import MetricsLogger, read_metrics

    class _Report(SilentReport):
        def __init__(self) -> None:
            super().__init__()
            self.metrics = MetricsLogger(tmp_path / "m.jsonl")

    report = _Report()
    for step in (1, 2, 3):
        report.metrics.log({"step": step})
    settling = ResumeSettling(True, checkpointed=True, interval=5, report=report)
    # the API's first batch is step 3: steps 1-2 were acknowledged after the checkpoint of step 1
    assert settling.settle(1, 3) == 2
    assert [r["step"] for r in read_metrics(tmp_path / "m.jsonl")] == [1, 2]
    assert settling.settle(2, 9) == 2  # once only
    assert ResumeSettling(False, False, 0, SilentReport()).settle(4, 9) == 4
    report.metrics.close()
