"""The demo's report pieces: the reward curve PNG, the rollouts page, the first/last-50 figures."""

from __future__ import annotations

import pytest

from demo.report import first_last, reward_change
from demo.report_artefacts import moving_average, plot_curve, write_rollouts


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


def test_reward_change_names_the_window_it_used():
    assert reward_change([0.0] * 10 + [1.0] * 10) == (0.0, 1.0, 10)  # a 20-step run: first/last 10
    assert reward_change([0.5] * 300)[2] == 50
