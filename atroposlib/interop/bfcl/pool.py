"""The training pool of the BFCL env: no entry of the held-out evaluation, by id or by question.

The non-live categories (simple, multiple, parallel, parallel_multiple in every language, and
irrelevance: 1,390 entries) are held out; training draws from BFCL's live AST categories (2,026 user-contributed
questions on other functions: live_simple, live_multiple, live_parallel, live_parallel_multiple), less any
entry whose question text equals a held-out one (one live_multiple entry repeats a non-live question),
plus items composed from live_simple entries the same way BFCL's parallel categories are made: two or three
questions on one function asked together (``parallel``: several calls of one function), or questions on
different functions asked together (``parallel_multiple``). The live set has only 40 parallel entries;
the composed ones give the held-out parallel categories something to transfer from. With ``synthetic``,
items in the held-out categories' style written from our own function templates come too
(``atroposlib.interop.bfcl.synthetic``: typed numeric arguments, parallel requests in one sentence).
Every item is scored
by the official checker, composed ones included (the worker composes them from its own entries); an
item whose gold answer the checker itself rejects (8 of BFCL's live ground truths contradict their
function docs) is left out, and so is one whose prompt ``fits`` refuses (too long for the run).

``held_out_overlap`` is the check a test runs: the pool's ids, parts and questions against the held-out set.
"""

from __future__ import annotations

import json
import random
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from atroposlib.envkit.chat import completion_budget
from atroposlib.errors import PromptTooLong
from atroposlib.interop.bfcl.checker import BfclChecker
from atroposlib.interop.bfcl.entries import Answer, BfclEntry
from atroposlib.interop.bfcl.gold import gold_text
from atroposlib.interop.bfcl.scores import LIVE_AST, NON_LIVE_AST, SIMPLE
from atroposlib.interop.bfcl.synthetic import synthetic_specs

HELD_OUT_SOURCES = tuple(dict.fromkeys((*SIMPLE, *NON_LIVE_AST[1:], "irrelevance")))
"""Every non-live single-turn category: none of their entries may reach training."""
POOL_SOURCES = LIVE_AST


def normalized(text: str) -> str:
    """A question as compared for overlap: lower case, runs of white space as one space."""
    return " ".join(text.lower().split())


@dataclass(frozen=True)
class TrainingPool:
    """The items to train on, and what was left out and why (counts by reason)."""

    items: tuple[BfclEntry, ...]
    excluded: dict[str, int] = field(default_factory=dict)

    def by_category(self) -> dict[str, int]:
        return dict(Counter(e.category for e in self.items))


def fits_within(
    tokenizer: Any, max_token_length: int, answer_room: int
) -> Callable[[BfclEntry], bool]:
    """The pool's length rule for a run: an item's prompt-mode conversation leaves at least
    ``answer_room`` tokens for the answer within ``max_token_length``."""

    def fits(entry: BfclEntry) -> bool:
        try:
            room = completion_budget(tokenizer, entry.chat(), max_token_length)
        except PromptTooLong:
            return False
        return room >= answer_room

    return fits


def held_out_overlap(pool: Iterable[BfclEntry], held_out: Iterable[BfclEntry]) -> list[str]:
    """Every pool item that shares an id (its own or a part's) or a question (its own or a part's,
    normalized) with a held-out entry, as one line each; empty when the pool is clean."""
    held = list(held_out)
    ids = {e.id for e in held}
    questions = {normalized(e.question) for e in held}
    part_questions: dict[str, str] = {}
    items = list(pool)
    for e in items:
        part_questions[e.id] = e.question
    found = []
    for e in items:
        names = {e.id, *e.parts} & ids
        texts = {normalized(e.question)} | {
            normalized(part_questions[p]) for p in e.parts if p in part_questions
        }
        if names or texts & questions:
            found.append(f"{e.id}: shares {sorted(names) or 'a question'} with the held-out set")
    return found


def build_pool(
    checker: BfclChecker,
    *,
    fits: Callable[[BfclEntry], bool],
    composed_parallel: int,
    composed_parallel_multiple: int,
    seed: int,
    synthetic: int = 0,
) -> TrainingPool:
    """The pool: the live AST entries (held-out overlaps and prompts ``fits`` refuses left out) plus
    ``composed_parallel`` and ``composed_parallel_multiple`` composed items and ``synthetic`` items in
    the non-live style (``synthetic``; all seeded), every one checked like the live entries."""
    held = [e for rows in checker.load(HELD_OUT_SOURCES).values() for e in rows]
    held_ids = {e.id for e in held}
    held_questions = {normalized(e.question) for e in held}
    excluded: Counter[str] = Counter()

    def admitted(entries: Iterable[BfclEntry], too_long: str) -> list[BfclEntry]:
        """``entries`` less held-out overlaps and prompts ``fits`` refuses (counted by reason)."""
        kept = []
        for e in entries:
            if e.id in held_ids or normalized(e.question) in held_questions:
                excluded["same id or question as a held-out entry"] += 1
            elif not fits(e):
                excluded[too_long] += 1
            else:
                kept.append(e)
        return kept

    loaded = [e for rows in checker.load(POOL_SOURCES).values() for e in rows]
    live = _gold_accepted(checker, admitted(loaded, "prompt too long"), excluded)
    singles = [e for e in live if e.category == "live_simple"]
    specs = composition_specs(singles, composed_parallel, composed_parallel_multiple, seed)
    composed = checker.compose(specs) if specs else []
    fitting = [e for e in composed if fits(e)]
    if len(fitting) < len(composed):
        excluded["composed prompt too long"] += len(composed) - len(fitting)
    made = checker.add(synthetic_specs(synthetic, seed)) if synthetic else []
    fitting += admitted(made, "synthetic prompt too long")
    return TrainingPool(tuple(live + _gold_accepted(checker, fitting, excluded)), dict(excluded))


def _gold_accepted(
    checker: BfclChecker, items: list[BfclEntry], excluded: Counter[str]
) -> list[BfclEntry]:
    """``items`` whose gold answer the checker accepts (a few BFCL ground truths contradict their own
    function docs: such an item cannot be learned); the others counted in ``excluded``."""
    verdicts = checker.check([Answer(e.id, text=gold_text(e.ground_truth or ())) for e in items])
    accepted = [e for e, v in zip(items, verdicts, strict=True) if v.valid]
    if len(accepted) < len(items):
        excluded["gold answer rejected by the checker"] += len(items) - len(accepted)
    return accepted


def _function_key(entry: BfclEntry) -> str:
    return json.dumps(list(entry.functions), sort_keys=True)


def composition_specs(
    singles: Sequence[BfclEntry], parallel: int, parallel_multiple: int, seed: int
) -> list[tuple[str, list[str], str]]:
    """``(id, part ids, category)`` of the composed items: ``parallel`` ones of 2-3 entries sharing
    their function, ``parallel_multiple`` ones of 2-3 entries on functions of different names; each set of
    parts once."""
    rng = random.Random(seed)
    groups: dict[str, list[BfclEntry]] = {}
    for e in singles:
        groups.setdefault(_function_key(e), []).append(e)
    shared = [g for g in groups.values() if len(g) >= 2]
    specs: list[tuple[str, list[str], str]] = []
    seen: set[tuple[str, ...]] = set()

    def add(parts: list[BfclEntry], category: str) -> None:
        key = tuple(sorted(p.id for p in parts))
        if key not in seen:
            seen.add(key)
            specs.append((f"composed_{category}_{len(specs)}", [p.id for p in parts], category))

    for _ in range(parallel * 4):  # tries: a repeat is skipped
        if not shared or sum(s[2] == "parallel" for s in specs) >= parallel:
            break
        group = rng.choice(shared)
        add(rng.sample(group, min(len(group), rng.choice((2, 2, 3)))), "parallel")
    by_name: dict[str, list[BfclEntry]] = {}
    for e in singles:
        by_name.setdefault(str(e.functions[0]["name"]), []).append(e)
    names = sorted(by_name)
    for _ in range(parallel_multiple * 4):
        if len(names) < 2 or sum(s[2] == "parallel_multiple" for s in specs) >= parallel_multiple:
            break
        chosen = rng.sample(names, rng.choice((2, 2, 3)))
        add([rng.choice(by_name[n]) for n in chosen], "parallel_multiple")
    return specs


__all__ = [
    "HELD_OUT_SOURCES",
    "POOL_SOURCES",
    "TrainingPool",
    "build_pool",
    "composition_specs",
    "fits_within",
    "held_out_overlap",
    "normalized",
]
