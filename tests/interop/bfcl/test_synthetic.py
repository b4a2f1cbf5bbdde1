"""The synthetic training items: the official checker accepts every gold answer and rejects a wrong
value, single calls where one is asked and several where several are; no function name is one of BFCL's
non-live functions and no question is a held-out one; the worker refuses an id it already has."""

from __future__ import annotations

from collections import Counter

import pytest

from atroposlib.interop.bfcl import Answer, build_pool, gold_text
from atroposlib.interop.bfcl.pool import HELD_OUT_SOURCES, held_out_overlap, normalized
from atroposlib.interop.bfcl.synthetic import CATEGORIES, TEMPLATES, synthetic_specs


@pytest.fixture(scope="module")
def held(bfcl_checker):
    return [e for rows in bfcl_checker.load(HELD_OUT_SOURCES).values() for e in rows]


def held_id(checker) -> str:
    return checker.load(["simple_python"])["simple_python"][0].id


def test_every_gold_answer_is_accepted_and_a_changed_value_is_not(bfcl_checker):
    specs = synthetic_specs(200, seed=3)
    assert Counter(s["category"] for s in specs) == {c: 50 for c in CATEGORIES}
    entries = bfcl_checker.add([{**s, "id": f"t_{s['id']}"} for s in specs])
    golds = [gold_text(e.ground_truth) for e in entries]
    verdicts = bfcl_checker.check(
        [Answer(e.id, text=g) for e, g in zip(entries, golds, strict=True)]
    )
    assert all(v.valid for v in verdicts), next(v.reason for v in verdicts if not v.valid)
    calls = {
        c: Counter(len(e.ground_truth) for e in entries if e.category == c) for c in CATEGORIES
    }
    assert set(calls["synthetic_simple"]) == set(calls["synthetic_multiple"]) == {1}
    assert min(calls["synthetic_parallel"]) == 2 and min(calls["synthetic_parallel_multiple"]) == 2
    assert max(calls["synthetic_parallel"]) == max(calls["synthetic_parallel_multiple"]) == 4
    # the prompt is BFCL's: its system prompt with the docs (and its Python hint), then the question
    first = entries[0]
    assert first.messages[-1]["content"] == specs[0]["question"]
    assert "Python 3 syntax" in first.messages[0]["content"]
    # the first call with its first argument replaced is wrong (the checker reads the values)
    (name, accepted), *_ = first.ground_truth[0].items()
    param = next(iter(accepted))
    wrong = gold_text([{name: {**accepted, param: ["not this"]}}])
    (verdict,) = bfcl_checker.check([Answer(first.id, text=wrong)])
    assert not verdict.valid and not verdict.malformed, verdict


def test_nothing_synthetic_is_held_out(bfcl_checker, held):
    names = {f["name"] for e in held for f in e.functions}
    assert not {t.name for t in TEMPLATES} & names
    questions = {normalized(e.question) for e in held}
    specs = synthetic_specs(400, seed=0)
    assert len({s["question"] for s in specs}) == 400
    assert not {normalized(s["question"]) for s in specs} & questions


def test_the_pool_takes_synthetic_items_and_the_overlap_check_sees_them(bfcl_checker, held):
    pool = build_pool(
        bfcl_checker,
        fits=lambda e: True,
        composed_parallel=0,
        composed_parallel_multiple=0,
        seed=5,
        synthetic=40,
    )
    counts = pool.by_category()
    assert {c: counts.get(c) for c in CATEGORIES} == {c: 10 for c in CATEGORIES}
    assert held_out_overlap(pool.items, held) == []
    planted = next(e for e in pool.items if e.category == "synthetic_simple")
    copy = held[0].__class__(**{**planted.__dict__, "question": held[0].question})
    assert len(held_out_overlap([copy], held)) == 1


def test_an_id_the_worker_has_is_refused_for_another_item(bfcl_checker):
    (spec,) = synthetic_specs(1, seed=9)
    (first,) = bfcl_checker.add([{**spec, "id": "t_once"}])
    assert bfcl_checker.add([{**spec, "id": "t_once"}]) == [first]  # the same item again
    with pytest.raises(ValueError, match="already loaded with other content"):
        bfcl_checker.add([{**spec, "id": "t_once", "question": "Something else?"}])
    with pytest.raises(ValueError, match="already loaded with other content"):
        bfcl_checker.add([{**spec, "id": held_id(bfcl_checker)}])
    with pytest.raises(ValueError, match="ground truth"):
        bfcl_checker.add([{**spec, "id": "t_none", "ground_truth": []}])


def test_several_call_requests_come_in_each_phrasing_and_never_repeat_a_value_they_must_not():
    specs = synthetic_specs(800, seed=1)
    parallel = [s for s in specs if s["category"] == "synthetic_parallel"]
    said = Counter(
        "same"
        if "Do the same with" in s["question"]
        else "apart"
        if "Also," in s["question"]
        else "list"
        for s in parallel
    )
    assert min(said.values()) > len(parallel) // 6, said  # each phrasing a fair share
    for s in specs:
        calls = [next(iter(c.values())) for c in s["ground_truth"]]
        for call in calls:  # a flight is never from a city to itself
            if "origin" in call:
                assert call["origin"] != call["destination"], s["question"]
        # no two calls asked the same: the checker could not tell which one an answer meant
        keys = [repr(sorted(c.items())) for c in s["ground_truth"]]
        assert len(set(keys)) == len(keys), s["question"]
