"""Evaluating a model on BFCL entries: ask each one (``answering``), a few at a time, then score every
reply with the official checker in one batch (``BfclReport``).

An entry that cannot be asked (its prompt leaves no room for an answer under ``max_token_length``) is
scored as BFCL's own pipeline scores a failed request: an empty reply goes to the checker (wrong for a
call category, right for irrelevance), and ``skipped`` counts it by reason. ``fixed_subsample`` is the
one way to evaluate on part of a category: the same entries for a seed, every category cut alike.
"""

from __future__ import annotations

import asyncio
import random
from collections import Counter
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Optional

from atroposlib.errors import PromptTooLong
from atroposlib.interop.bfcl.answering import Reply
from atroposlib.interop.bfcl.checker import BfclChecker
from atroposlib.interop.bfcl.entries import Answer, BfclEntry
from atroposlib.interop.bfcl.report import BfclReport, ItemResult

Ask = Callable[[BfclEntry], Awaitable[Reply]]


def fixed_subsample(
    by_category: Mapping[str, Sequence[BfclEntry]], per_category: Optional[int], seed: int = 0
) -> list[BfclEntry]:
    """Every entry (``per_category`` None), or the same ``per_category`` entries of each category
    for a given ``seed`` (a seeded shuffle of its ids, then BFCL's order kept), categories in order."""
    chosen: list[BfclEntry] = []
    for category, entries in by_category.items():
        if per_category is None or per_category >= len(entries):
            chosen += list(entries)
            continue
        ids = sorted(e.id for e in entries)
        random.Random(f"{seed}:{category}").shuffle(ids)
        keep = set(ids[:per_category])
        chosen += [e for e in entries if e.id in keep]
    return chosen


def answer_of(entry: BfclEntry, reply: Reply) -> Answer:
    """What the checker gets: the calls in FC mode, the text in prompt mode."""
    if reply.calls is not None:
        return Answer(entry.id, calls=reply.calls)
    return Answer(entry.id, text=reply.text)


async def evaluate_entries(
    entries: Sequence[BfclEntry],
    ask: Ask,
    checker: BfclChecker,
    *,
    mode: str,
    concurrency: int = 16,
) -> BfclReport:
    """Ask every entry (``concurrency`` at a time), then check every reply at once."""
    limit = asyncio.Semaphore(max(1, concurrency))
    skipped: Counter[str] = Counter()

    async def one(entry: BfclEntry) -> Reply:
        async with limit:
            try:
                return await ask(entry)
            except PromptTooLong:
                skipped["prompt too long"] += 1
                return Reply("")

    replies = await asyncio.gather(*(one(e) for e in entries))
    answers = [answer_of(e, r) for e, r in zip(entries, replies, strict=True)]
    verdicts = await asyncio.to_thread(checker.check, answers)
    results = [
        ItemResult(e.id, e.category, r.text, v, calls=r.calls, cut=r.cut)
        for e, r, v in zip(entries, replies, verdicts, strict=True)
    ]
    return BfclReport(results, mode=mode, skipped=dict(skipped))


__all__ = ["Ask", "answer_of", "evaluate_entries", "fixed_subsample"]
