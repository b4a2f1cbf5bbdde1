"""The demo's report pieces: the reward curve PNG, the rollouts page, the first/last-50 figures."""

from __future__ import annotations

import pytest

from example_trainer.demo import first_last, reward_change
from example_trainer.metrics import format_step_line, read_metrics
from example_trainer.report import moving_average, plot_curve, write_rollouts


def test_first_last_means():
    values = [0.0] * 50 + [0.5] * 100 + [1.0] * 50
    assert first_last(values) == (0.0, 1.0)
    assert first_last([0.2, 0.4, 0.6, 0.8], k=50) == pytest.approx((0.3, 0.7))  # short runs: halves


def test_moving_average():
    assert moving_average([1, 2, 3, 4], 2) == [1.0, 1.5, 2.5, 3.5]


def test_curve_png_and_rollouts_html(tmp_path):
    rows = [{"step": i, "reward_mean": i / 10} for i in range(1, 11)] + [
        {"step": 11, "reward_mean": None}
    ]
    png = plot_curve(rows, tmp_path / "c.png", title="t")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    group = {
        "tokens": [[1, 2]],
        "masks": [[-100, 2]],
        "scores": [1.0],
        "messages": [
            [{"role": "user", "content": "1+1="}, {"role": "assistant", "content": "<b>2</b>"}]
        ],
    }
    html = write_rollouts([group], [group], tmp_path / "r.html").read_text()
    assert "1+1=" in html and "<b>2</b>" not in html  # model text is escaped
    assert "early" in html and "late" in html


def test_metrics_file_keeps_the_last_row_of_a_step(tmp_path):
    p = tmp_path / "m.jsonl"
    p.write_text(
        '{"step": 1, "reward_mean": 0.1}\n{"step": 2, "reward_mean": 0.2}\n{"step": 2, "reward_mean": 0.3}\n'
    )
    rows = read_metrics(p)
    assert [r["reward_mean"] for r in rows] == [0.1, 0.3]
    assert "step    2/5 reward 0.300" in format_step_line({**rows[1], "loss": 0.0}, 5)


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


def test_reward_change_names_the_window_it_used():
    assert reward_change([0.0] * 10 + [1.0] * 10) == (0.0, 1.0, 10)  # a 20-step run: first/last 10
    assert reward_change([0.5] * 300)[2] == 50
