"""The training pool holds no held-out entry, by id or by question text (its own or a composed item's
parts'), and the check would see one; the composed items are what they say; a fixed subsample is
the same entries for a seed, every category cut alike."""

from __future__ import annotations

import dataclasses

import pytest

from atroposlib.interop.bfcl import NON_LIVE_AST, build_pool, fixed_subsample, held_out_overlap
from atroposlib.interop.bfcl.pool import HELD_OUT_SOURCES, normalized


@pytest.fixture(scope="module")
def pool_and_held(bfcl_checker):
    pool = build_pool(
        bfcl_checker,
        fits=lambda entry: True,
        composed_parallel=300,
        composed_parallel_multiple=300,
        seed=0,
    )
    held = [e for rows in bfcl_checker.load(HELD_OUT_SOURCES).values() for e in rows]
    return pool, held


def test_no_held_out_entry_is_in_the_training_pool(pool_and_held):
    pool, held = pool_and_held
    assert len(held) == 1390  # every non-live single-turn entry, all languages and irrelevance
    ids = {e.id for e in held}
    questions = {normalized(e.question) for e in held}
    by_id = {e.id: e for e in pool.items}
    for item in pool.items:
        assert item.id not in ids and not set(item.parts) & ids
        assert normalized(item.question) not in questions
        for part in item.parts:
            assert normalized(by_id[part].question) not in questions
    assert held_out_overlap(pool.items, held) == []


def test_the_overlap_check_sees_a_planted_entry(pool_and_held):
    pool, held = pool_and_held
    planted = dataclasses.replace(pool.items[0], id="mine", question=held[5].question.upper())
    assert held_out_overlap([*pool.items, planted], held) == [
        "mine: shares a question with the held-out set"
    ]
    # the one live entry that repeats a non-live question is left out, and said so
    assert pool.excluded["same id or question as a held-out entry"] == 1
    assert "live_multiple_190-84-0" not in {e.id for e in pool.items}


def test_the_pool_is_live_entries_plus_composed_parallel_items(pool_and_held):
    pool, _ = pool_and_held
    counts = pool.by_category()
    # parallel items need questions on one function: the live set has a few hundred distinct sets
    assert 250 <= counts["parallel"] <= 300 and 290 <= counts["parallel_multiple"] <= 300
    assert counts["live_simple"] + counts["live_multiple"] > 1290
    # BFCL ground truths the checker itself rejects are left out (their answer cannot be learned)
    assert 0 < pool.excluded["gold answer rejected by the checker"] < 20
    by_id = {e.id: e for e in pool.items}
    for item in (e for e in pool.items if e.parts):
        parts = [by_id[p] for p in item.parts]
        assert 2 <= len(parts) <= 3 and all(p.category == "live_simple" for p in parts)
        names = {p.functions[0]["name"] for p in parts}
        assert len(names) == 1 if item.category == "parallel" else len(names) >= 2
        assert len(item.ground_truth) == len(parts)


def test_a_fixed_subsample_is_stratified_and_the_same_for_a_seed(bfcl_checker):
    loaded = bfcl_checker.load(NON_LIVE_AST)
    first = fixed_subsample(loaded, 5, seed=3)
    assert [e.id for e in first] == [e.id for e in fixed_subsample(loaded, 5, seed=3)]
    assert [e.category for e in first] == [c for c in NON_LIVE_AST for _ in range(5)]
    assert [e.id for e in first] != [e.id for e in fixed_subsample(loaded, 5, seed=4)]
    assert len(fixed_subsample(loaded, None)) == 1000
