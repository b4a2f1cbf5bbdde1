"""``bench/bfcl_crosscheck.py --replay``'s fake server must answer each BFCL question with the reply
recorded for that entry. BFCL asks some questions word for word in two categories (with one function,
and with several); the replay tells them apart by the functions in the prompt. Real entries, through
the official checker's loader."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import pytest

from atroposlib.interop.bfcl import BfclChecker, bfcl_missing

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def entries():
    reason = bfcl_missing()
    if reason:
        pytest.skip(reason)
    with BfclChecker.start() as checker:
        loaded = checker.load(["simple_python", "multiple", "parallel", "parallel_multiple"])
    return [e for group in loaded.values() for e in group]


def test_a_question_asked_in_two_categories_gets_each_entrys_own_reply(entries):
    sys.path.insert(0, str(REPO))
    try:
        crosscheck = importlib.import_module("bench.bfcl_crosscheck")
    finally:
        sys.path.remove(str(REPO))
    by_question: dict[str, list] = {}
    for e in entries:
        by_question.setdefault(e.question, []).append(e)
    twins = [group for group in by_question.values() if len(group) > 1]
    assert twins, "BFCL's non-live sets have questions asked in more than one entry"
    for group in twins:
        for e in group:
            prompt = "\n".join(str(m["content"]) for m in e.messages)
            assert crosscheck.replay_entry(entries, prompt).id == e.id, [x.id for x in group]
    unasked = crosscheck.replay_entry(entries, "What is the weather on Mars?")
    assert unasked is None
