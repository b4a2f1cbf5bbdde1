"""LLM-as-judge prompts and verdict parsing for RLAIF (single-answer scores or pairwise preferences).

A verdict that cannot be read is a judge failure, not a bad answer: parsers return None and the
environment marks the group ``reward_status="unavailable"`` instead of scoring it 0.
"""

from __future__ import annotations

import random
import re
from typing import Optional

_SCORE = re.compile(r"score\s*[:=]?\s*(\d+(?:\.\d+)?)\s*(?:/\s*10)?", re.IGNORECASE)
_PREFERENCE = re.compile(r"\[\[\s*([AB])\s*\]\]")

JUDGE_SYSTEM = "You are a strict, fair judge of answers written by an AI assistant."

_TASKS = [
    "Write a haiku about {t}.",
    "Explain {t} to a ten-year-old in two sentences.",
    "Give three practical tips about {t}.",
    "Write a one-paragraph story involving {t}.",
    "Argue for and against {t} in two short sentences each.",
]
_TOPICS = [
    "the ocean",
    "recycling",
    "learning to cook",
    "time zones",
    "honeybees",
    "public libraries",
    "rainy days",
    "chess openings",
    "bicycles",
    "the moon",
    "saving money",
    "volcanoes",
]


def offline_prompts(count: int, seed: int) -> list[str]:
    """Open-ended instructions built from templates x topics (for use without a dataset hub)."""
    rng = random.Random(seed)
    return [rng.choice(_TASKS).format(t=rng.choice(_TOPICS)) for _ in range(count)]


def single_judge_prompt(question: str, answer: str) -> str:
    return (
        f"Rate the assistant's answer to the user's request from 1 (useless) to 10 (excellent).\n\n"
        f"[Request]\n{question}\n\n[Answer]\n{answer}\n\n"
        "Explain briefly, then end with 'Score: N'."
    )


def pairwise_judge_prompt(question: str, answer_a: str, answer_b: str) -> str:
    return (
        f"Which answer serves the user's request better?\n\n[Request]\n{question}\n\n"
        f"[Answer A]\n{answer_a}\n\n[Answer B]\n{answer_b}\n\n"
        "Explain briefly, then end with [[A]] or [[B]]."
    )


def parse_score(verdict: str) -> Optional[float]:
    """The last 'Score: N' (1-10) mapped to [0, 1]; None when absent or out of range."""
    found = _SCORE.findall(verdict)
    if not found:
        return None
    value = float(found[-1])
    return (value - 1.0) / 9.0 if 1.0 <= value <= 10.0 else None


def parse_preference(verdict: str) -> Optional[str]:
    """'A' or 'B' from the last [[A]]/[[B]]; None when absent."""
    found = _PREFERENCE.findall(verdict)
    return found[-1] if found else None
