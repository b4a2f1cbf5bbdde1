"""Pick the best of a group of alternatives (Atropos's ``select_best_index``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Union

Score = Union[int, float]


def select_best_index(
    primary_scores: Sequence[Score],
    secondary_scores: Sequence[Score],
    primary_higher_is_better: bool = True,
    secondary_lower_is_better: bool = True,
) -> int:
    """Index of the best alternative: best primary score; ties broken by the secondary score
    (lower wins by default, e.g. length); remaining ties keep the earliest index.

    Raises ``ValueError`` for empty lists or lists of different lengths."""
    if not primary_scores or not secondary_scores:
        raise ValueError("Input score lists cannot be empty.")
    if len(primary_scores) != len(secondary_scores):
        raise ValueError("Primary and secondary score lists must have the same length.")
    p_sign = 1 if primary_higher_is_better else -1
    s_sign = -1 if secondary_lower_is_better else 1
    best = 0
    for i in range(1, len(primary_scores)):
        p_i, p_b = p_sign * primary_scores[i], p_sign * primary_scores[best]
        if p_i > p_b or (
            p_i == p_b and s_sign * secondary_scores[i] > s_sign * secondary_scores[best]
        ):
            best = i
    return best


__all__ = ["select_best_index"]
