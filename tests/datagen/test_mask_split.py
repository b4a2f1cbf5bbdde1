"""Prompt/completion split comes from the masks (what was trained), never from the longest prefix
the group's sequences share: a group whose completions all start with the same token ("12", "15",
"13", "17" all start with "1") must keep that token in every completion, in SFT and DPO text records,
in the HTML report's token view and in view-run's."""

from __future__ import annotations

import re

import pytest

from atroposlib.datagen.selection import (
    DpoOptions,
    SftOptions,
    select_dpo,
    select_sft,
)
from atroposlib.report.groups import build_view
from atroposlib.report.html import render_group, write_html_report
from atroposlib.report.tokenizer import make_decoder, make_token_text
from atroposlib.viewer.app import render_view
from atroposlib.viewer.samples import make_group

PROMPT_END = "<|im_start|>assistant\n"


@pytest.fixture(scope="module")
def tok():
    from atroposlib.inference.tiny_model import build_tokenizer, default_corpus

    return build_tokenizer(default_corpus(0, 200), vocab_size=300)


@pytest.fixture(scope="module")
def shared_first_token_group(tok):
    g = make_group(
        "What is 7 + 5?",
        "12",
        ["12", "15", "13", "17"],
        encode=lambda s: tok.encode(s, add_special_tokens=False),
    )
    del g["messages"]  # text mode: everything comes from the tokens
    # the test is about a shared first completion token: make sure the tokenizer gives one
    starts = [next(j for j, x in enumerate(m) if x != -100) for m in g["masks"]]
    firsts = {t[k] for t, k in zip(g["tokens"], starts, strict=True)}
    assert len(firsts) == 1, "completions should share their first token"
    return g


def test_sft_keeps_the_shared_first_token_in_the_completion(tok, shared_first_token_group):
    sel = select_sft(shared_first_token_group, SftOptions(), make_decoder(tok))
    assert [r["completion"] for r in sel.records] == ["12<|im_end|>"]
    assert sel.records[0]["prefix"].endswith(PROMPT_END)


def test_dpo_keeps_the_shared_first_token_in_both_sides(tok, shared_first_token_group):
    opts = DpoOptions(allow_negative_scores=True, minimum_score_diff_max_min=0.5)
    sel = select_dpo(shared_first_token_group, opts, make_decoder(tok))
    assert sel.records, sel.rejected
    rec = sel.records[0]
    assert rec["pos"] == "12<|im_end|>" and rec["neg"] in {"15<|im_end|>", "13<|im_end|>"}
    assert rec["prefix"].endswith(PROMPT_END)


def _trained_spans_per_sequence(html: str) -> list[int]:
    blocks = html.split('<div class="seq ')[1:]
    return [b.count('class="tok tok-trained"') for b in blocks]


def _trained_counts(group) -> list[int]:
    return [sum(1 for m in row if m != -100) for row in group["masks"]]


def test_report_token_view_shows_every_trained_token(tok, shared_first_token_group, tmp_path):
    g = shared_first_token_group
    view = build_view(g, decode=make_decoder(tok))
    assert [s.completion_text for s in view.sequences] == [
        f"{c}<|im_end|>" for c in ("12", "15", "13", "17")
    ]
    assert view.prompt_text.endswith(PROMPT_END)
    html = render_group(view, token_text=make_token_text(tok), token_view=True)
    assert _trained_spans_per_sequence(html) == _trained_counts(g)
    page = write_html_report([g], tmp_path / "r.html", tokenizer=tok, token_view=True).read_text()
    assert _trained_spans_per_sequence(page) == _trained_counts(g)


def test_viewer_token_view_shows_every_trained_token(tok, shared_first_token_group):
    g = shared_first_token_group
    html, n = render_view([g], decode=make_decoder(tok), token_text=make_token_text(tok))
    assert n == 1
    assert _trained_spans_per_sequence(html) == _trained_counts(g)
    bodies = re.findall(r'<div class="msg-body"><pre class="text">([^<]*)</pre>', html)
    assert sorted(bodies) == sorted(f"{c}&lt;|im_end|&gt;" for c in ("12", "15", "13", "17"))


def test_without_a_tokenizer_the_ids_start_at_the_first_trained_token(shared_first_token_group):
    g = shared_first_token_group
    html = render_group(build_view(g), token_view=False)
    k = next(j for j, m in enumerate(g["masks"][0]) if m != -100)
    ids = " ".join(str(t) for t in g["tokens"][0][k:])
    assert f'<pre class="ids">{ids}</pre>' in html


def test_groups_the_split_cannot_use_are_counted(tok, shared_first_token_group):
    from atroposlib.datagen.selection import RULE_NO_MASKS, RULE_NOTHING_TRAINED

    g = dict(shared_first_token_group)
    no_masks = {k: v for k, v in g.items() if k != "masks"}
    sel = select_sft(no_masks, SftOptions(), make_decoder(tok))
    assert sel.records == [] and sel.rejected == {RULE_NO_MASKS: 4}
    nothing = dict(g, masks=[[-100] * len(t) for t in g["tokens"]])
    sel = select_sft(nothing, SftOptions(allow_negative_scores=True), make_decoder(tok))
    assert sel.records == [] and sel.rejected == {RULE_NOTHING_TRAINED: 4}
