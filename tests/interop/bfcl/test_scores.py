"""BFCL's aggregates as its leaderboard adds them up (non-live: unweighted over simple, multiple,
parallel, parallel_multiple, simple itself over its languages; live: weighted by count), with one
standard-error bars."""

from __future__ import annotations

import math

import pytest

from atroposlib.interop.bfcl.scores import aggregates, category_score


def test_non_live_ast_is_the_unweighted_mean_of_its_four_categories():
    scores = {
        "simple_python": category_score([True] * 40 + [False] * 360),
        "multiple": category_score([True] * 100 + [False] * 100),
        "parallel": category_score([True] * 50 + [False] * 150),
        "parallel_multiple": category_score([False] * 200),
    }
    agg = aggregates(scores)["non_live_ast"]
    assert agg.accuracy == pytest.approx((0.1 + 0.5 + 0.25 + 0.0) / 4)
    ses = [math.sqrt(p * (1 - p) / n) for p, n in ((0.1, 400), (0.5, 200), (0.25, 200))]
    assert agg.se == pytest.approx(math.sqrt(sum(s * s for s in ses)) / 4)
    assert agg.n == 1000 and "live_ast" not in aggregates(scores)
    del scores["parallel"]
    assert aggregates(scores) == {}  # a missing part: no aggregate, never a silent zero


def test_simple_averages_its_languages_and_live_weights_by_count():
    scores = {
        "simple_python": category_score([True] * 4),
        "simple_java": category_score([False] * 4),
        "multiple": category_score([True]),
        "parallel": category_score([True]),
        "parallel_multiple": category_score([True]),
        "live_simple": category_score([True] * 3 + [False]),
        "live_multiple": category_score([False] * 4),
        "live_parallel": category_score([True]),
        "live_parallel_multiple": category_score([True]),
    }
    agg = aggregates(scores)
    assert agg["non_live_ast"].accuracy == pytest.approx((0.5 + 1 + 1 + 1) / 4)
    assert agg["live_ast"].accuracy == pytest.approx(5 / 10)
