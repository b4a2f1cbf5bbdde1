"""Scoring math answers: ``\\boxed{}`` extraction, math-verify equivalence and the length penalty.

The rules follow Atropos's GSM8K/MATH servers: the answer is read from the text after the last
``</think>``, the boxed answer is preferred, a correct answer scores +1 and a wrong one -1, and when a
whole group is correct the longer answers are penalised (nothing below half of ``max_token_length``,
then linearly down to 0 at ``max_token_length``).
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Sequence
from typing import Optional

from latex2sympy2_extended import NormalizationConfig
from math_verify import LatexExtractionConfig, parse, verify

logger = logging.getLogger(__name__)

_BOXED = re.compile(r"\\(?:boxed|fbox)\s*\{")
_ANSWER_PARSE_CONFIG = [
    LatexExtractionConfig(
        normalization_config=NormalizationConfig(
            nits=False, malformed_operators=False, basic_latex=True, boxed="all", units=True
        ),
        boxed_match_priority=0,
        try_extract_without_anchor=False,
    )
]


def strip_thinking(text: str) -> str:
    """The part of a response after its last ``</think>`` (the whole text when there is none)."""
    return text.rsplit("</think>", 1)[-1]


def extract_boxed(text: str) -> Optional[str]:
    """Content of the last ``\\boxed{...}`` in ``text`` (braces balanced), or None."""
    found: Optional[str] = None
    for match in _BOXED.finditer(text):
        depth, start = 1, match.end()
        for pos in range(start, len(text)):
            if text[pos] == "{":
                depth += 1
            elif text[pos] == "}":
                depth -= 1
                if depth == 0:
                    found = text[start:pos]
                    break
    return found


def gsm8k_final_answer(solution: str) -> str:
    """The final number of a GSM8K solution (the text after ``####``, without thousands commas)."""
    return solution.split("####")[-1].strip().replace(",", "")


def _timeout() -> Optional[int]:
    # math-verify's timeout uses SIGALRM, which only works in the main thread.
    return 5 if threading.current_thread() is threading.main_thread() else None


def verify_math(response: str, gold: str) -> Optional[bool]:
    """Whether ``response`` (after its thinking block) states an answer equivalent to ``gold``.

    ``gold`` is a bare answer (``"18"``, ``"\\frac{1}{2}"``) or already boxed. Returns None when the gold
    answer itself cannot be parsed, so callers can skip the item instead of training on noise.
    """
    gold_text = gold if "\\boxed" in gold else "\\boxed{" + gold + "}"
    timeout = _timeout()
    gold_parsed = parse(
        gold_text,
        extraction_mode="first_match",
        extraction_config=[LatexExtractionConfig()],
        parsing_timeout=timeout,
    )
    if not gold_parsed:
        logger.warning("gold answer %r could not be parsed by math-verify", gold)
        return None
    answer_parsed = parse(
        strip_thinking(response),
        extraction_config=_ANSWER_PARSE_CONFIG,
        extraction_mode="first_match",
        parsing_timeout=timeout,
    )
    return bool(verify(gold_parsed, answer_parsed, timeout_seconds=timeout))


def length_penalised_scores(
    correct: Sequence[bool], lengths: Sequence[int], max_token_length: int
) -> list[float]:
    """+1/-1 per answer; when every answer is correct, long ones lose reward linearly.

    No penalty up to half of ``max_token_length``; from there the score falls linearly to 0 at
    ``max_token_length`` (and stays 0 beyond it).
    """
    if len(correct) != len(lengths):
        raise ValueError(f"{len(correct)} correctness flags but {len(lengths)} lengths")
    if not correct or not all(correct):
        return [1.0 if ok else -1.0 for ok in correct]
    threshold = max_token_length * 0.5
    scores = []
    for length in lengths:
        if length <= threshold:
            scores.append(1.0)
        else:
            fraction = min((length - threshold) / (max_token_length - threshold), 1.0)
            scores.append(1.0 - fraction)
    return scores


def grade_math_group(
    answers: Sequence[str], gold: str, lengths: Sequence[int], max_token_length: int
) -> Optional[tuple[list[bool], list[float]]]:
    """(correct, scores) of one group: math-verify per answer, then ``length_penalised_scores``.

    None when math-verify cannot parse ``gold`` itself: skip the item rather than train on a wrong -1."""
    verdicts = [verify_math(answer, gold) for answer in answers]
    if any(ok is None for ok in verdicts):
        return None
    correct = [bool(ok) for ok in verdicts]
    return correct, length_penalised_scores(correct, lengths, max_token_length)


def scores_from_verdicts(
    verdicts: Sequence[Optional[bool]], lengths: Sequence[int], max_token_length: int
) -> list[Optional[float]]:
    """Scores of one group from its math-verify verdicts (``score_samples(verify_math, ...)``):
    ``length_penalised_scores`` over the answers that have a verdict, None where there is none (the
    sample timed out or raised: its reward is unavailable, never a -1)."""
    known = [i for i, ok in enumerate(verdicts) if ok is not None]
    graded = length_penalised_scores(
        [bool(verdicts[i]) for i in known], [lengths[i] for i in known], max_token_length
    )
    scores: list[Optional[float]] = [None] * len(verdicts)
    for i, score in zip(known, graded, strict=True):
        scores[i] = score
    return scores


def all_same(scores: Sequence[float]) -> bool:
    """True when a group carries no learning signal (every score equal)."""
    return len(set(scores)) <= 1
