"""SFT / DPO selection rules: top-n, negative scores, min diff, pairs, formats and rule counts."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from atroposlib.datagen.export import JsonlFeed, run_datagen
from atroposlib.datagen.selection import (
    CHAT_TEMPLATE_ROLES,
    RULE_MIN_DIFF,
    RULE_NO_MESSAGES,
    RULE_NO_PAIR,
    RULE_NON_POSITIVE,
    RULE_PAIR_LIMIT,
    RULE_TOO_LONG,
    RULE_TOP_N,
    RULE_UNAVAILABLE,
    DpoOptions,
    SftOptions,
    find_common_prefix,
    select_dpo,
    select_sft,
    split_prefix,
)
from tests.jsonl import read_jsonl

PROMPT = "Q: 2+2? A:"


def decode(ids):
    return bytes(ids).decode("utf-8")


def group(completions, scores, with_messages=True, **extra):
    g = {
        "tokens": [list((PROMPT + c).encode()) for c in completions],
        "masks": [[-100] * len(PROMPT) + list(c.encode()) for c in completions],
        "scores": list(scores),
        **extra,
    }
    if with_messages:
        g["messages"] = [
            [{"role": "user", "content": "2+2?"}, {"role": "assistant", "content": c}]
            for c in completions
        ]
    return g


def total(sel) -> int:
    return sum(sel.rejected.values())


def test_common_prefix_and_split():
    assert find_common_prefix(["abcd", "abxy", "abz"]) == "ab"
    assert find_common_prefix(["same", "same"]) == "same"
    assert find_common_prefix([]) == ""
    assert find_common_prefix(["x", "y"]) == ""
    # a prefix that occurs again later must not cut the completion (str.split would)
    assert split_prefix(["ab-ab-1", "ab-ab-2"]) == ("ab-ab-", ["1", "2"])
    assert split_prefix(["only one"]) == ("", ["only one"])


def test_sft_top_n_sorted_best_first_in_prefix_format():
    g = group([" 3", " 4", " four", " 5"], [0.1, 1.0, 0.7, 0.2], with_messages=False)
    sel = select_sft(g, SftOptions(save_top_n_per_group=2), decode)

    def sft(c: str, score: float) -> dict:
        segments = [{"text": PROMPT, "label": False}, {"text": c, "label": True}]
        return {"prefix": PROMPT, "completion": c, "score": score, "segments": segments}

    assert sel.records == [sft(" 4", 1.0), sft(" four", 0.7)]
    assert sel.rejected == {RULE_TOP_N: 2}


def test_sft_drops_non_positive_unless_allowed():
    g = group(["a", "b", "c"], [1.0, 0.0, -1.0])
    sel = select_sft(g, SftOptions(save_messages=True), None)
    assert [r["score"] for r in sel.records] == [1.0]
    assert sel.rejected[RULE_NON_POSITIVE] == 2
    sel = select_sft(g, SftOptions(save_messages=True, allow_negative_scores=True), None)
    assert [r["score"] for r in sel.records] == [1.0, 0.0, -1.0]
    assert sel.records[0] == {"messages": g["messages"][0], "score": 1.0}
    assert total(sel) == 0


def test_sft_minimum_score_diff_is_relative_to_group_min():
    g = group(["a", "b", "c", "d"], [-1.0, -0.2, 0.4, 1.0])
    opts = SftOptions(
        save_messages=True,
        allow_negative_scores=True,
        minimum_score_diff_max_min=1.0,
        save_top_n_per_group=10,
    )
    sel = select_sft(g, opts)
    # kept: score - (-1.0) > 1.0  ->  0.4 and 1.0; -0.2 (diff 0.8) and -1.0 (diff 0) fail
    assert [r["score"] for r in sel.records] == [1.0, 0.4]
    assert sel.rejected == {RULE_MIN_DIFF: 2}
    # a group whose scores are all equal gives nothing once a min diff is asked for
    flat = select_sft(group(["a", "b"], [1.0, 1.0]), opts)
    assert flat.records == [] and flat.rejected[RULE_MIN_DIFF] == 2


def test_sft_rules_account_for_every_sequence():
    g = group(["aa", "b", "c", "d", "e"], [2.0, 1.5, 1.0, -3.0, 0.0])
    g["tokens"][0] = list(range(200))  # too long
    sel = select_sft(g, SftOptions(save_messages=True, save_top_n_per_group=1, max_token_len=50))
    assert len(sel.records) + total(sel) == 5
    assert sel.rejected == {RULE_TOO_LONG: 1, RULE_TOP_N: 1, RULE_NON_POSITIVE: 2}
    assert sel.records[0]["score"] == 1.5


def test_sft_needs_messages_for_message_format_and_skips_unavailable_rewards():
    no_msgs = group(["a", "b"], [1.0, 0.5], with_messages=False)
    sel = select_sft(no_msgs, SftOptions(save_messages=True))
    assert sel.records == [] and sel.rejected == {RULE_NO_MESSAGES: 2}
    down = group(["a", "b"], [1.0, 0.5], reward_status="unavailable")
    sel = select_sft(down, SftOptions(save_messages=True))
    assert sel.records == [] and sel.rejected == {RULE_UNAVAILABLE: 2}


def test_sft_text_format_requires_a_decoder():
    with pytest.raises(ValueError, match="tokenizer"):
        select_sft(group(["a", "b"], [1.0, 0.5]), SftOptions(save_messages=False), None)


def test_options_refuse_bad_values():
    with pytest.raises(ValidationError):
        SftOptions(save_top_n_per_group=-1)
    with pytest.raises(ValidationError):
        DpoOptions(minimum_score_diff_max_min=-0.1)


def test_dpo_pairs_best_with_worst_distinct_partners():
    g = group([" w", " x", " y", " z"], [1.0, 0.9, 0.1, 0.0], with_messages=False)
    sel = select_dpo(
        g, DpoOptions(save_n_pairs_per_group=3, minimum_score_diff_max_min=0.5), decode
    )

    def dpo(pos: str, neg: str, score: float, neg_score: float) -> dict:
        return {
            "prefix": PROMPT,
            "pos": pos,
            "neg": neg,
            "score": score,
            "neg_score": neg_score,
            "pos_segments": [{"text": pos, "label": True}],
            "neg_segments": [{"text": neg, "label": True}],
        }

    assert sel.records == [dpo(" w", " z", 1.0, 0.0), dpo(" x", " y", 0.9, 0.1)]
    assert total(sel) == 0


def test_dpo_min_diff_blocks_close_pairs():
    g = group(["a", "b", "c"], [1.0, 0.8, 0.6])
    sel = select_dpo(g, DpoOptions(save_messages=True, minimum_score_diff_max_min=0.5))
    assert sel.records == []
    assert sel.rejected == {RULE_NO_PAIR: 3}
    sel = select_dpo(g, DpoOptions(save_messages=True, minimum_score_diff_max_min=0.3))
    assert [(r["score"], r["neg_score"]) for r in sel.records] == [(1.0, 0.6)]
    assert sel.records[0]["pos"] == g["messages"][0] and sel.records[0]["neg"] == g["messages"][2]


def test_dpo_chosen_must_be_positive_unless_allowed():
    g = group(["a", "b", "c", "d"], [-0.1, -0.5, -1.0, -2.0])
    sel = select_dpo(g, DpoOptions(save_messages=True, minimum_score_diff_max_min=0.5))
    assert sel.records == [] and sel.rejected[RULE_NON_POSITIVE] == 4
    sel = select_dpo(
        g,
        DpoOptions(save_messages=True, minimum_score_diff_max_min=0.4, allow_negative_scores=True),
    )
    assert [(r["score"], r["neg_score"]) for r in sel.records] == [(-0.1, -2.0), (-0.5, -1.0)]
    # the difference must be strictly larger than the minimum (as in Atropos): -1.0 vs -0.5 at 0.5
    sel = select_dpo(
        g,
        DpoOptions(save_messages=True, minimum_score_diff_max_min=0.5, allow_negative_scores=True),
    )
    assert [(r["score"], r["neg_score"]) for r in sel.records] == [(-0.1, -2.0)]


def test_dpo_pair_limit_and_rejected_pool():
    g = group(list("abcdef"), [1.0, 1.0, 1.0, 0.0, 0.0, 0.0])
    sel = select_dpo(g, DpoOptions(save_messages=True, save_n_pairs_per_group=1))
    assert len(sel.records) == 1
    assert sel.rejected == {RULE_PAIR_LIMIT: 4}  # 2 unpaired winners + 2 unused losers
    assert len(sel.records) * 2 + total(sel) == 6
    sel = select_dpo(g, DpoOptions(save_messages=True, save_n_pairs_per_group=5))
    assert len(sel.records) == 3 and total(sel) == 0
    # each rejected sequence is used at most once
    negs = [id(r["neg"]) for r in sel.records]
    assert len(set(negs)) == 3


def graded_group():
    """A group as the tool-calling envs build it: the second sequence carries a grader note."""
    g = group(["ok", "bad call"], [1.0, 0.0])
    g["messages"][0].insert(0, {"role": "system", "content": "use tools"})
    g["messages"][0].append({"role": "tool", "content": "42"})
    g["messages"][1].append({"role": "grader", "content": "malformed JSON in the tool call"})
    return g


def test_message_records_keep_only_chat_template_roles():
    assert CHAT_TEMPLATE_ROLES == ("system", "user", "assistant", "tool")
    g = graded_group()
    sft = select_sft(g, SftOptions(save_messages=True, allow_negative_scores=True))
    assert [[m["role"] for m in r["messages"]] for r in sft.records] == [
        ["system", "user", "assistant", "tool"],
        ["user", "assistant"],
    ]
    assert sft.roles_dropped == [{}, {"grader": 1}]
    dpo = select_dpo(g, DpoOptions(save_messages=True))
    assert len(dpo.records) == 1
    assert all(m["role"] != "grader" for m in dpo.records[0]["neg"])
    assert sum(dpo.roles_dropped[0].values()) == 1
    # the group itself is untouched (viewers still show the note)
    assert g["messages"][1][-1]["role"] == "grader"
    # the set is an option: keeping "grader" writes the note, dropping "tool" leaves out the tool turn
    wide = select_sft(
        g,
        SftOptions(
            save_messages=True,
            allow_negative_scores=True,
            keep_roles=("user", "assistant", "grader"),
        ),
    )
    assert wide.records[1]["messages"][-1]["role"] == "grader"
    assert wide.roles_dropped[0] == {"system": 1, "tool": 1}
    with pytest.raises(ValidationError):
        SftOptions(keep_roles=())


def test_datagen_summary_counts_left_out_messages(tmp_path):
    import json

    src = tmp_path / "groups.jsonl"
    src.write_text("".join(json.dumps(graded_group()) + "\n" for _ in range(3)))
    out = tmp_path / "sft.jsonl"
    opts = SftOptions(save_messages=True, allow_negative_scores=True)
    # 3 groups x 2 records, but only 5 are wanted: the sixth record (a graded one) is not counted
    summary = run_datagen(
        JsonlFeed(src), lambda g: select_sft(g, opts), out, "w", 5, progress=False
    )
    rows = read_jsonl(out)
    assert len(rows) == 5
    assert not any(m["role"] == "grader" for r in rows for m in r["messages"])
    assert summary.messages_dropped == {"grader": 2}
    assert summary.as_dict()["messages_dropped_by_role"] == {"grader": 2}
    assert "  left out 2 messages with role 'grader' (not in --keep-roles)" in summary.lines(
        "records"
    )
