"""BFCL's categories and how its leaderboard adds them up, with one-standard-error bars.

* **Non-live AST** (BFCL's "Non-Live AST" summary): the unweighted mean of simple, multiple, parallel and
  parallel_multiple, where simple is itself the unweighted mean of the simple categories evaluated
  (BFCL's own column averages simple_python, simple_java and simple_javascript; with only simple_python,
  simple is simple_python). Our held-out set, ``NON_LIVE_AST``, is its four Python categories.
* **Live AST** (BFCL's "Live AST" summary): the mean over the live AST entries, weighted by count.

A category's error bar is the binomial standard error ``sqrt(p (1 - p) / n)``; an unweighted mean of K
categories has ``sqrt(sum se_k^2) / K``, a count-weighted mean ``sqrt(sum n_k^2 se_k^2) / sum n_k``.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

NON_LIVE_AST = ("simple_python", "multiple", "parallel", "parallel_multiple")
"""The held-out categories: BFCL's non-live AST categories in Python (1,000 entries)."""
SIMPLE = ("simple_python", "simple_java", "simple_javascript")
LIVE_AST = ("live_simple", "live_multiple", "live_parallel", "live_parallel_multiple")
"""BFCL's live AST categories (user-contributed functions and questions)."""
RELEVANCE = ("irrelevance", "live_irrelevance", "live_relevance")
SINGLE_TURN = (*SIMPLE, *NON_LIVE_AST[1:], "irrelevance", *LIVE_AST, *RELEVANCE[1:])
"""Every single-turn category the checker scores (bfcl-eval's ``SINGLE_TURN_CATEGORY``; a test pins it)."""


@dataclass(frozen=True)
class Score:
    """An accuracy (0-1) over ``n`` entries and its one-standard-error bar."""

    accuracy: float
    se: float
    n: int

    def text(self) -> str:
        """``48.2 ± 2.5`` (points)."""
        return f"{100 * self.accuracy:.1f} ± {100 * self.se:.1f}"

    def as_dict(self) -> dict[str, float]:
        return {"accuracy": self.accuracy, "se": self.se, "n": self.n}


def category_score(valid: Sequence[bool]) -> Score:
    """The share of ``valid`` verdicts and its binomial standard error."""
    n = len(valid)
    if n == 0:
        return Score(0.0, 0.0, 0)
    p = sum(valid) / n
    return Score(p, math.sqrt(p * (1 - p) / n), n)


def unweighted(scores: Sequence[Score]) -> Score:
    k = len(scores)
    return Score(
        sum(s.accuracy for s in scores) / k,
        math.sqrt(sum(s.se**2 for s in scores)) / k,
        sum(s.n for s in scores),
    )


def weighted(scores: Sequence[Score]) -> Score:
    total = sum(s.n for s in scores)
    return Score(
        sum(s.accuracy * s.n for s in scores) / total,
        math.sqrt(sum((s.n * s.se) ** 2 for s in scores)) / total,
        total,
    )


def aggregates(by_category: Mapping[str, Score]) -> dict[str, Score]:
    """BFCL's summaries that the evaluated categories make up: ``non_live_ast`` when simple (any of its
    languages), multiple, parallel and parallel_multiple are all there; ``live_ast`` when the four live
    AST categories are."""
    out: dict[str, Score] = {}
    simple = [by_category[c] for c in SIMPLE if c in by_category]
    rest = [by_category.get(c) for c in NON_LIVE_AST[1:]]
    if simple and all(s is not None for s in rest):
        out["non_live_ast"] = unweighted([unweighted(simple), *[s for s in rest if s is not None]])
    if all(c in by_category for c in LIVE_AST):
        out["live_ast"] = weighted([by_category[c] for c in LIVE_AST])
    return out


def error_types(verdicts: Iterable[tuple[str, bool, str | None]]) -> dict[str, dict[str, int]]:
    """Per category, how many answers failed with each of BFCL's error types
    (``verdicts``: (category, valid, error_type))."""
    counts: dict[str, Counter[str]] = {}
    for category, valid, error_type in verdicts:
        if not valid:
            counts.setdefault(category, Counter())[error_type or "unknown"] += 1
    return {c: dict(sorted(k.items(), key=lambda kv: -kv[1])) for c, k in counts.items()}


__all__ = [
    "LIVE_AST",
    "NON_LIVE_AST",
    "RELEVANCE",
    "SIMPLE",
    "SINGLE_TURN",
    "Score",
    "aggregates",
    "category_score",
    "error_types",
    "unweighted",
    "weighted",
]
