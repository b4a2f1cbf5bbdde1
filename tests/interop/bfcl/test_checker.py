"""The official BFCL checker across the process boundary: its categories, its verdict on every held-out
gold answer (our renderer's too), malformed answers wrong with their reason, FC mode's dotted names,
and bad requests or a missing checker as one line each (the worker survives a bad request)."""

from __future__ import annotations

import pytest

from atroposlib.errors import ConfigError
from atroposlib.interop.bfcl import NON_LIVE_AST, Answer, BfclChecker, gold_text
from atroposlib.interop.bfcl.scores import SINGLE_TURN


def test_the_checker_scores_exactly_bfcls_single_turn_categories(bfcl_checker):
    assert bfcl_checker.version == "2026.3.23"
    assert bfcl_checker.categories == SINGLE_TURN


def test_every_held_out_gold_answer_is_valid_but_the_two_bfcl_contradicts(bfcl_checker):
    loaded = bfcl_checker.load(NON_LIVE_AST)
    assert {c: len(v) for c, v in loaded.items()} == {
        "simple_python": 400,
        "multiple": 200,
        "parallel": 200,
        "parallel_multiple": 200,
    }
    entries = [e for rows in loaded.values() for e in rows]
    verdicts = bfcl_checker.check([Answer(e.id, text=gold_text(e.ground_truth)) for e in entries])
    rejected = {v.id: v.error_type for v in verdicts if not v.valid}
    # two of BFCL's own ground truths disagree with their function docs (a required parameter
    # missing; a parallel_multiple call matched twice): the official checker rejects them
    assert rejected == {
        "simple_python_200": "simple_function_checker:missing_required",
        "parallel_multiple_26": "parallel_function_checker_no_order:cannot_find_match",
    }


def test_answers_that_are_no_calls_are_wrong_with_their_reason(bfcl_checker):
    (entry,) = [e for e in bfcl_checker.load(["parallel"])["parallel"] if e.id == "parallel_0"]
    right = "[spotify.play(artist='Taylor Swift', duration=20), spotify.play(artist='Maroon 5', duration=15)]"
    wrong_value = right.replace("20", "25")
    texts = [right, "Sure! Here are the songs.", "", "[spotify.play(artist=", wrong_value, "[]"]
    v = bfcl_checker.check([Answer(entry.id, text=t) for t in texts])
    assert [x.valid for x in v] == [True, False, False, False, False, False]
    assert v[0].error_type is None and v[0].errors == () and v[0].reason == "valid"
    # prose and broken syntax are no list of calls; an empty reply is an empty list (BFCL's decoder
    # reads "" as "[]"), so it is wrong for its count, as the official evaluator says
    assert [x.malformed for x in v] == [False, True, False, True, False, False]
    assert v[1].reason.startswith("ast_decoder:decoder_failed: Invalid syntax.")
    assert v[3].error_type == "ast_decoder:decoder_failed"
    assert v[4].error_type == "parallel_function_checker_no_order:cannot_find_match"
    assert v[2].error_type == v[5].error_type == "parallel_function_checker_no_order:wrong_count"
    assert v[0].decoded == [
        {"spotify.play": {"artist": "Taylor Swift", "duration": 20}},
        {"spotify.play": {"artist": "Maroon 5", "duration": 15}},
    ]


def test_irrelevance_wants_no_call(bfcl_checker):
    entry = bfcl_checker.load(["irrelevance"])["irrelevance"][0]
    assert entry.ground_truth is None
    name = entry.functions[0]["name"]
    v = bfcl_checker.check(
        [
            Answer(entry.id, text="None of the functions can answer that."),
            Answer(entry.id, text=f"[{name}(x=1)]"),
        ]
    )
    assert [x.valid for x in v] == [True, False]
    assert v[1].error_type == "irrelevance_error:decoder_success"


def test_fc_mode_sends_dots_as_underscores_and_takes_json_arguments(bfcl_checker):
    (entry,) = [e for e in bfcl_checker.load(["parallel"])["parallel"] if e.id == "parallel_0"]
    assert [t["function"]["name"] for t in entry.tools] == ["spotify_play"]
    calls = [
        {"name": "spotify_play", "arguments": '{"artist": "Taylor Swift", "duration": 20}'},
        {"name": "spotify_play", "arguments": {"artist": "Maroon 5", "duration": 15}},
    ]
    bad_json = [{"name": "spotify_play", "arguments": '{"artist": '}]
    v = bfcl_checker.check(
        [
            Answer(entry.id, calls=calls),
            Answer(entry.id, calls=bad_json),
            Answer(entry.id, calls=[]),
        ]
    )
    assert v[0].valid and [x.valid for x in v[1:]] == [False, False]
    assert v[1].malformed and v[2].malformed  # no call at all: no decode, as BFCL's FC handlers


def test_a_bad_request_is_one_line_and_the_worker_goes_on(bfcl_checker):
    with pytest.raises(ValueError, match=r"^unknown BFCL category chess; valid: simple_python, "):
        bfcl_checker.load(["chess"])
    with pytest.raises(ValueError, match="entry 'nope_1' is not loaded"):
        bfcl_checker.check([Answer("nope_1", text="[]")])
    entry = bfcl_checker.load(["simple_python"])["simple_python"][0]
    assert bfcl_checker.check([Answer(entry.id, text=gold_text(entry.ground_truth))])[0].valid


@pytest.mark.parametrize("python", ["/nonexistent/python", "current"])
def test_a_missing_checker_is_one_line_naming_the_install(monkeypatch, python):
    import sys

    monkeypatch.setenv("ATROPOS_BFCL_PYTHON", sys.executable if python == "current" else python)
    with pytest.raises(ConfigError) as exc:
        BfclChecker.start()
    message = str(exc.value)
    assert "\n" not in message and "scripts/setup_bfcl.sh" in message
    if python == "current":  # the project's Python has no bfcl_eval: the worker says so
        assert "No module named 'bfcl_eval'" in message


def test_right_count_is_read_off_bfcls_error_type(bfcl_checker):
    """``Verdict.right_count``: a parallel answer missing a call is the wrong count, the same calls in
    reverse order are valid, a call to a made-up function in place of one is the right count (rejected
    for what is in it); a call where irrelevance asks for none is not."""
    loaded = bfcl_checker.load(["parallel", "irrelevance"])
    entry = next(e for e in loaded["parallel"] if len(e.ground_truth) == 2)
    first, second = (gold_text([call]).strip()[1:-1] for call in entry.ground_truth)
    irrelevant = loaded["irrelevance"][0]
    answers = [
        Answer(entry.id, text=f"[{first}]"),
        Answer(entry.id, text=f"[{second}, {first}]"),
        Answer(entry.id, text=f"[{first}, made_up_function(x=1)]"),
        Answer(irrelevant.id, text="[made_up_function(x=1)]"),
    ]
    short, reversed_, made_up, irrelevant_call = bfcl_checker.check(answers)
    assert short.error_type.endswith(":wrong_count") and not short.right_count
    assert reversed_.valid and reversed_.right_count
    assert not made_up.valid and not made_up.malformed and made_up.right_count, made_up
    assert irrelevant_call.error_type.startswith("irrelevance_error:")
    assert not irrelevant_call.right_count


def test_a_composed_items_parts_are_each_checked_on_their_own_entry(bfcl_checker):
    """A composed item's verdict counts the parts the checker accepts a call for as the answer to that
    part's own entry, each call for one part at most; ``part_share`` is over the larger of the parts
    asked and the calls written. BFCL's own entries carry no parts."""
    singles = bfcl_checker.load(["live_simple"])["live_simple"]
    names = list(dict.fromkeys(str(e.functions[0]["name"]) for e in singles))
    one = next(e for e in singles if e.functions[0]["name"] == names[0])
    two = next(e for e in singles if e.functions[0]["name"] == names[1])
    (item,) = bfcl_checker.compose([("composed_test_0", [one.id, two.id], "parallel_multiple")])
    first, second = (gold_text(e.ground_truth).strip()[1:-1] for e in (one, two))
    made_up = "made_up_function(x=1)"
    answers = {
        "both, reversed": f"[{second}, {first}]",
        "first only": f"[{first}]",
        "first and a made-up call": f"[{first}, {made_up}]",
        "first twice": f"[{first}, {first}]",
        "both and the first again": f"[{first}, {second}, {first}]",
        "prose": "I would call the first function.",
    }
    checked = bfcl_checker.check([Answer(item.id, text=t) for t in answers.values()])
    verdicts = dict(zip(answers, checked, strict=True))
    accepted = {
        k: (v.valid, v.parts, v.parts_accepted, round(v.part_share, 3)) for k, v in verdicts.items()
    }
    assert accepted == {
        "both, reversed": (True, 2, 2, 1.0),
        "first only": (False, 2, 1, 0.5),
        "first and a made-up call": (False, 2, 1, 0.5),
        "first twice": (False, 2, 1, 0.5),
        "both and the first again": (False, 2, 2, 0.667),
        "prose": (False, 2, 0, 0.0),
    }
    (own,) = bfcl_checker.check([Answer(one.id, text=f"[{first}]")])
    assert own.valid and own.parts == 0 and own.part_share == 0.0
