"""The trainer's metrics file: the last row of a step wins, and a disabled wandb still writes JSONL."""

from __future__ import annotations

import logging

from example_trainer.metrics import format_step_line, read_metrics


def test_metrics_file_keeps_the_last_row_of_a_step(tmp_path):
    p = tmp_path / "m.jsonl"
    p.write_text(
        '{"step": 1, "reward_mean": 0.1}\n{"step": 2, "reward_mean": 0.2}\n{"step": 2, "reward_mean": 0.3}\n'
    )
    rows = read_metrics(p)
    assert [r["reward_mean"] for r in rows] == [0.1, 0.3]
    assert "step    2/5 reward 0.300" in format_step_line({**rows[1], "loss": 0.0}, 5)


def test_a_row_still_being_written_is_left_for_the_next_read(tmp_path, caplog):
    # the demo's live line reads the file while the trainer appends; a read that lands mid-row
    # once ended a whole run at its last step (JSONDecodeError)
    p = tmp_path / "m.jsonl"
    row = '{"step": 2, "reward_mean": 0.2, "loss": 0.0}'
    p.write_text('{"step": 1, "reward_mean": 0.1}\n' + row[:20])
    assert [r["step"] for r in read_metrics(p)] == [1]
    with caplog.at_level(logging.WARNING, logger="example_trainer.metrics"):
        assert [r["step"] for r in read_metrics(p)] == [1]
        assert not caplog.records  # a live read: the row may still be coming
        assert [r["step"] for r in read_metrics(p, final=True)] == [1]
    (warning,) = caplog.records
    assert "half-written last row" in warning.getMessage() and str(p) in warning.getMessage()
    p.write_text('{"step": 1, "reward_mean": 0.1}\n' + row + "\n")
    assert [r["step"] for r in read_metrics(p)] == [1, 2]


def test_metrics_logger_with_wandb_disabled_still_writes_jsonl(tmp_path, monkeypatch):
    from example_trainer.metrics import MetricsLogger

    monkeypatch.setenv("WANDB_MODE", "disabled")
    logger = MetricsLogger(
        tmp_path / "m.jsonl", use_wandb=True, wandb_project="p", config={"lr": 1.0}
    )
    logger.log({"step": 1, "reward_mean": 0.5, "ratio_min": float("inf")})
    logger.close()
    rows = read_metrics(tmp_path / "m.jsonl")
    assert rows == [
        {"step": 1, "reward_mean": 0.5, "ratio_min": None}
    ]  # non-finite -> null, valid JSON
