"""Multiple-choice prompts and answer-letter extraction after a thinking block.

The model is asked to think inside ``<think>...</think>`` and then give one letter. Extraction is strict
on purpose (it is a reward): with ``require_think`` the response must contain exactly one closed thinking
block, and the text after it must name exactly one valid letter. Every rejection comes with a reason.
"""

from __future__ import annotations

import re
import string
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Optional

LETTERS = string.ascii_uppercase

_PATTERNS = [
    re.compile(r"\\boxed\{\s*\(?([A-Z])\)?\s*\}"),
    re.compile(r"(?i:answer)\s*(?:is|:)?\s*[:\-]?\s*\(?\**([A-Z])\b"),
    re.compile(r"^\s*\(?([A-Z])[\).:]?\s*$", re.MULTILINE),
    re.compile(r"\(([A-Z])\)"),
]


@dataclass
class LetterExtraction:
    """The extracted letter (None when rejected) and why."""

    letter: Optional[str]
    reason: str


def format_question(question: str, choices: Sequence[str]) -> str:
    """The question followed by lettered choices (``A) ...``)."""
    if not 2 <= len(choices) <= len(LETTERS):
        raise ValueError(f"a question needs 2..{len(LETTERS)} choices, got {len(choices)}")
    lines = [question.strip(), ""]
    lines += [f"{LETTERS[i]}) {choice}" for i, choice in enumerate(choices)]
    lines += [
        "",
        "Think inside <think></think>, then answer with the letter of the correct choice.",
    ]
    return "\n".join(lines)


def extract_letter(response: str, num_choices: int, require_think: bool = True) -> LetterExtraction:
    """The single answer letter stated after the thinking block, or None with a reason."""
    valid = LETTERS[:num_choices]
    if require_think:
        opens, closes = response.count("<think>"), response.count("</think>")
        if closes == 0:
            return LetterExtraction(None, "no closed </think> block")
        if opens > 1 or closes > 1:
            return LetterExtraction(None, "more than one thinking block")
    tail = response.rsplit("</think>", 1)[-1]
    for pattern in _PATTERNS:
        found: list[str] = [m.upper() for m in pattern.findall(tail)]
        found = [m for m in found if m in LETTERS]
        if not found:
            continue
        distinct = sorted(set(found))
        if len(distinct) > 1:
            return LetterExtraction(None, f"ambiguous answer: {', '.join(distinct)}")
        if distinct[0] not in valid:
            return LetterExtraction(None, f"letter {distinct[0]} is not one of {', '.join(valid)}")
        return LetterExtraction(distinct[0], "ok")
    return LetterExtraction(None, "no answer letter after the thinking block")


def score_letter(
    response: str, answer_index: int, num_choices: int, require_think: bool = True
) -> float:
    """1.0 for the right letter, 0.0 for a wrong or unreadable one."""
    extraction = extract_letter(response, num_choices, require_think)
    return 1.0 if extraction.letter == LETTERS[answer_index] else 0.0
