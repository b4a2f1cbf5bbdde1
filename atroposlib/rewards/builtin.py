"""Built-in reward functions (registered on import): accuracy, format, length and repetition.

* ``math_accuracy``: 1.0 when math-verify finds the completion's answer (after any ``</think>``)
  equal to ``answers[i]``, else 0.0.
* ``format``: 1.0 when ``pattern`` (a regex) matches the completion.
* ``r1_format`` / ``think_format``: exactly one ``<think>...</think>`` block first, then a non-empty answer.
* ``length_penalty``: 0 up to ``threshold`` x ``max_length`` (characters, or tokens with a
  ``tokenizer``), then linearly down to -1 at ``max_length``.
* ``repetition_penalty``: minus the fraction of repeated word n-grams (0 for no repetition).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any, Optional

from atroposlib.rewards.registry import register

_THINK = re.compile(r"^\s*<think>(?P<thought>.*?)</think>\s*(?P<answer>\S.*)$", re.DOTALL)


def _after_think(text: str) -> str:
    return text.split("</think>")[-1]


@register("math_accuracy")
def math_accuracy(completions: list[str], answers: Sequence[Any], **_: Any) -> list[float]:
    from math_verify import parse, verify

    if len(answers) == 1 and len(completions) > 1:
        answers = list(answers) * len(completions)
    scores = []
    for text, gold in zip(completions, answers, strict=True):
        gold_s = str(gold)
        gold_parsed = parse(gold_s if "\\boxed" in gold_s or "$" in gold_s else f"${gold_s}$")
        got = parse(_after_think(text))
        scores.append(1.0 if gold_parsed and got and verify(gold_parsed, got) else 0.0)
    return scores


@register("format")
def format_reward(completions: list[str], pattern: str, **_: Any) -> list[float]:
    rx = re.compile(pattern, re.DOTALL)
    return [1.0 if rx.search(t) else 0.0 for t in completions]


@register("r1_format")
def r1_format(completions: list[str], **_: Any) -> list[float]:
    out = []
    for t in completions:
        m = _THINK.match(t)
        ok = (
            m is not None
            and "<think>" not in m.group("thought")
            and "<think>" not in m.group("answer")
            and "</think>" not in m.group("answer")
        )
        out.append(1.0 if ok else 0.0)
    return out


register("think_format")(r1_format)


@register("length_penalty")
def length_penalty(
    completions: list[str],
    max_length: int,
    threshold: float = 0.5,
    tokenizer: Optional[Any] = None,
    **_: Any,
) -> list[float]:
    if max_length <= 0:
        raise ValueError("length_penalty needs max_length > 0")
    start = threshold * max_length
    out = []
    for t in completions:
        n = len(tokenizer.encode(t, add_special_tokens=False)) if tokenizer is not None else len(t)
        out.append(0.0 if n <= start else -min(1.0, (n - start) / max(max_length - start, 1e-9)))
    return out


@register("repetition_penalty")
def repetition_penalty(completions: list[str], ngram: int = 3, **_: Any) -> list[float]:
    out = []
    for t in completions:
        words = t.split()
        grams = [tuple(words[i : i + ngram]) for i in range(max(0, len(words) - ngram + 1))]
        out.append(-(1.0 - len(set(grams)) / len(grams)) if grams else 0.0)
    return out


__all__ = ["format_reward", "length_penalty", "math_accuracy", "r1_format", "repetition_penalty"]
