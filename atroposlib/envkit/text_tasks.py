"""Procedural text tasks that need no dataset: letter counting and text reversal.

Words come from reasoning-gym's bundled word list when it is installed, otherwise they are random
pronounceable strings; either way the items are reproducible from a seed. Answers are read from an
``<answer>...</answer>`` tag after the thinking block.
"""

from __future__ import annotations

import logging
import random
import re
from functools import lru_cache
from importlib import resources
from typing import Optional

from atroposlib.envkit.math_scoring import strip_thinking

logger = logging.getLogger(__name__)

_ANSWER_TAG = re.compile(r"<answer>(.*?)</answer>", re.DOTALL | re.IGNORECASE)


@lru_cache(maxsize=1)
def word_list() -> tuple[str, ...]:
    """Lower-case words of 3-10 letters (reasoning-gym's list, or generated ones as a fallback)."""
    try:
        text = resources.files("reasoning_gym").joinpath("data/words3to10.txt").read_text("utf-8")
        words = tuple(w.strip().lower() for w in text.split() if w.strip().isalpha())
        if words:
            return words
    except (ModuleNotFoundError, FileNotFoundError) as exc:
        logger.warning("reasoning-gym word list unavailable (%s); using generated words", exc)
    rng = random.Random(1234)
    consonants, vowels = "bcdfghjklmnprstvwz", "aeiou"
    return tuple(
        "".join(rng.choice(consonants) + rng.choice(vowels) for _ in range(rng.randint(2, 4)))
        for _ in range(5000)
    )


def extract_answer_tag(response: str) -> Optional[str]:
    """Text of the last ``<answer>`` tag after the thinking block, stripped; None when absent."""
    found = _ANSWER_TAG.findall(strip_thinking(response))
    return found[-1].strip() if found else None


def letter_counting_item(rng: random.Random, max_words: int = 3) -> dict[str, str]:
    """``{"question", "answer"}``: how often a letter occurs in a short phrase."""
    words = [rng.choice(word_list()) for _ in range(rng.randint(1, max_words))]
    phrase = " ".join(words)
    letters = sorted(set(phrase.replace(" ", "")))
    # Half the time ask for a letter that occurs, otherwise any letter (the answer may be 0).
    letter = rng.choice(letters) if rng.random() < 0.5 else rng.choice("abcdefghijklmnopqrstuvwxyz")
    question = (
        f'How many times does the letter "{letter}" appear in "{phrase}"? '
        "Give the number inside <answer></answer> tags."
    )
    return {"question": question, "answer": str(phrase.count(letter))}


def text_reversal_item(rng: random.Random, max_words: int = 3) -> dict[str, str]:
    """``{"question", "answer"}``: reverse a short phrase character by character."""
    phrase = " ".join(rng.choice(word_list()) for _ in range(rng.randint(1, max_words)))
    question = (
        f'Reverse this text character by character: "{phrase}". '
        "Write only the reversed text inside <answer></answer> tags."
    )
    return {"question": question, "answer": phrase[::-1]}


def score_exact(response: str, answer: str) -> float:
    """1.0 when the tagged answer equals ``answer`` exactly (after trimming), else 0.0."""
    given = extract_answer_tag(response)
    return 1.0 if given is not None and given == answer else 0.0


def make_items(kind: str, count: int, seed: int) -> list[dict[str, str]]:
    """``count`` reproducible items of ``kind`` ("letter_counting" or "text_reversal")."""
    makers = {"letter_counting": letter_counting_item, "text_reversal": text_reversal_item}
    if kind not in makers:
        raise ValueError(f"unknown text task {kind!r}; choose from {sorted(makers)}")
    rng = random.Random(seed)
    return [makers[kind](rng) for _ in range(count)]
