"""Training items written in the style of BFCL's non-live categories, but not drawn from them: function
schemas of our own (Python-style docs with typed numeric, string and list parameters) and requests made
from templates with sampled values, single (``synthetic_simple``), one function among several
(``synthetic_multiple``), several calls of one function asked in one sentence (``synthetic_parallel``:
"the factorial of 5, 10 and 15") and calls of different functions asked together
(``synthetic_parallel_multiple``).

Why: BFCL's live entries (the rest of the training pool) are user-contributed APIs whose values are
mostly strings, and composed items join two whole questions; the held-out non-live categories ask for
numeric arguments and for parallel calls in one sentence. Four RL attempts on the live pool learned the
training items and not the held-out style (docs/training.md). These items are scored by the same
official checker: the worker takes them with their own functions and ground truth (``BfclChecker.add``).
No function name here is one of BFCL's non-live functions, and no question equals a held-out one
(``tests/interop/bfcl/test_synthetic.py``).

``synthetic_specs(n, seed)`` gives the items' ``(id, category, question, functions, ground_truth)``.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

from atroposlib.interop.bfcl.synthetic_templates import (
    TEMPLATES,
    TEMPLATES_VERSION,
    Param,
    Template,
)

CATEGORIES = (
    "synthetic_simple",
    "synthetic_multiple",
    "synthetic_parallel",
    "synthetic_parallel_multiple",
)
"""The kinds of item, in the order ``synthetic_specs`` cycles through them. BFCL's checker picks its
parallel or multiple rules from the words in the category name, as it does for its own."""


def _spoken(value: Any) -> str:
    """A value as a request says it (a list as Python writes one: ``[2, 4, 5]``)."""
    return str(list(value)) if isinstance(value, tuple) else str(value)


def _listed(words: Sequence[str]) -> str:
    """``a``, ``a and b``, ``a, b and c``."""
    return words[0] if len(words) == 1 else f"{', '.join(words[:-1])} and {words[-1]}"


def _value(param: Param, raw: Any) -> Any:
    return list(raw) if param.type == "array" else raw


def _draw(t: Template, rng: random.Random) -> dict[str, Any]:
    """Values for every required parameter, and for the optional ones half the time."""
    drawn: dict[str, Any] = {}
    for p in t.params:
        if p.required or rng.random() < 0.5:
            taken = {drawn[q.name] for q in t.params if q.name in drawn and q.values == p.values}
            drawn[p.name] = rng.choice([v for v in p.values if v not in taken] or p.values)
    return drawn


def _truth(t: Template, drawn: dict[str, Any]) -> dict[str, Any]:
    """BFCL's ground truth of one call: each parameter's accepted values; an optional parameter not
    asked for may be left out (``""``) or given its default."""
    accepted: dict[str, list[Any]] = {}
    for p in t.params:
        if p.name in drawn:
            accepted[p.name] = [_value(p, drawn[p.name])]
        else:
            accepted[p.name] = ["", p.default]
    return {t.name: accepted}


def _request(t: Template, drawn: dict[str, Any], many: Sequence[Any] = ()) -> str:
    spoken = {k: _spoken(v) for k, v in drawn.items()}
    if many:
        spoken[t.params[0].name] = _listed([_spoken(v) for v in many])
        text = t.ask_many.format(**spoken)
    else:
        text = t.ask.format(**spoken)
    optional = [p for p in t.params if not p.required and p.name in drawn]
    if optional and t.ask_optional:
        text += t.ask_optional.format(**spoken)
    return text


def _join(requests: Sequence[str]) -> str:
    """Requests asked in one message: ``First. Also, second`` (each keeps its own punctuation)."""
    head, *rest = requests
    return " ".join([head, *(f"Also, {r[0].lower()}{r[1:]}" for r in rest)])


def _one(rng: random.Random, t: Template) -> tuple[str, dict[str, Any]]:
    drawn = _draw(t, rng)
    return _request(t, drawn), _truth(t, drawn)


CALLS_ASKED = (2, 2, 2, 3, 3, 4)
"""How many calls a several-call request asks for, drawn from this: about as often as BFCL's parallel
entries ask for two (55%), three (26%) and four (18%)."""


def _many(rng: random.Random, t: Template, calls: int = 0) -> tuple[str, list[dict[str, Any]]]:
    """One request for ``calls`` (else drawn from ``CALLS_ASKED``) calls of ``t``, in one of three
    phrasings: the first parameter's values listed in one sentence, the other parameters shared ("the
    digit sums of 81981 and 30884"); the first call asked and the rest "the same with" other values;
    each call asked with values of its own, one request after another."""
    first = t.params[0]
    distinct = list(dict.fromkeys(first.values))
    n = min(calls or rng.choice(CALLS_ASKED), len(distinct))
    style = rng.randrange(3)
    if style == 2:
        draws: list[dict[str, Any]] = []
        for _ in range(20 * n):
            if len(draws) == n:
                break
            d = _draw(t, rng)
            if d not in draws:
                draws.append(d)
        if len(draws) == n:
            return _join([_request(t, d) for d in draws]), [_truth(t, d) for d in draws]
    drawn = _draw(t, rng)
    # a value another parameter of the same kind already has is not asked for (no flight from a city
    # to itself)
    clash = {drawn[p.name] for p in t.params[1:] if p.name in drawn and p.values == first.values}
    free = [v for v in distinct if v not in clash]
    n = min(n, len(free))
    picks = rng.sample(free, n)
    truth = [_truth(t, {**drawn, first.name: v}) for v in picks]
    if style == 1:
        head = _request(t, {**drawn, first.name: picks[0]})
        rest = _listed([_spoken(v) for v in picks[1:]])
        return (
            f"{head} Do the same with {first.said or first.name.replace('_', ' ')} {rest}.",
            truth,
        )
    return _request(t, drawn, picks), truth


def _several_functions(
    rng: random.Random, chosen: Sequence[Template]
) -> tuple[str, list[dict[str, Any]]]:
    """One message asking for calls of each of ``chosen`` (2-4 calls in all, as BFCL's
    parallel_multiple entries do about equally often), one or more calls of each."""
    total = max(len(chosen), rng.choice((2, 3, 4)))
    counts = [1] * len(chosen)
    for _ in range(total - len(chosen)):
        counts[rng.randrange(len(chosen))] += 1
    questions: list[str] = []
    truth: list[dict[str, Any]] = []
    for t, c in zip(chosen, counts, strict=True):
        if c == 1:
            q, call = _one(rng, t)
            questions.append(q)
            truth.append(call)
        else:
            q, calls = _many(rng, t, c)
            questions.append(q)
            truth += calls
    return _join(questions), truth


def synthetic_specs(n: int, seed: int) -> list[dict[str, Any]]:
    """``n`` items (``id``, ``category``, ``question``, ``functions``, ``ground_truth``), the four
    kinds in turn; each question once."""
    rng = random.Random(seed)
    specs: list[dict[str, Any]] = []
    seen: set[str] = set()
    for _ in range(n * 10):  # tries: a repeated question is skipped
        if len(specs) >= n:
            break
        category = CATEGORIES[len(specs) % len(CATEGORIES)]
        target = rng.choice(TEMPLATES)
        others = [t for t in TEMPLATES if t.name != target.name]
        offered = [target]
        truth: list[dict[str, Any]]
        if category == "synthetic_simple":
            question, call = _one(rng, target)
            truth = [call]
        elif category == "synthetic_multiple":
            question, call = _one(rng, target)
            truth = [call]
            offered += rng.sample(others, rng.choice((1, 2, 3)))
        elif category == "synthetic_parallel":
            question, truth = _many(rng, target)
        else:
            chosen = [target, *rng.sample(others, rng.choice((1, 1, 2)))]
            question, truth = _several_functions(rng, chosen)
            offered = list(chosen)
            if rng.random() < 0.3:  # a function not asked for, as BFCL's sometimes offer
                offered.append(rng.choice([t for t in others if t not in chosen]))
        if question in seen:
            continue
        seen.add(question)
        rng.shuffle(offered)
        specs.append(
            {
                "id": f"{category}_{len(specs)}",
                "category": category,
                "question": question,
                "functions": [t.doc() for t in offered],
                "ground_truth": truth,
            }
        )
    return specs


__all__ = ["CATEGORIES", "TEMPLATES", "TEMPLATES_VERSION", "Param", "Template", "synthetic_specs"]
