"""Each sequence's own prompt, and model text shown as text, in the HTML report and in view-run.

A realistic token-only multi-turn group: the sequences ask different questions, and in one of them the
first assistant turn is masked, so its first trained token comes later (its prompt holds a turn and a
tool's output). The report and view-run must show every sequence's own prompt and its whole
completion; a prompt is shown once for the group only when all are identical. Completions are shown
as text: a line that starts with ``>`` and leading spaces survive.
"""

from __future__ import annotations

import pytest

from atroposlib.report.groups import build_view
from atroposlib.report.html import render_group, write_html_report
from atroposlib.report.tokenizer import make_decoder, make_token_text
from atroposlib.viewer.app import render_view
from tests.report.multiturn import first_trained, group, read_cards, sequence

SYSTEM = ("system", "You can call a calculator.")
QUOTED = "> What is 7 + 5?\n  I will ask the calculator.\n\n    calc(7 + 5)"
INDENTED = "  5\n>  is the answer\n\tdone"


@pytest.fixture(scope="module")
def tok():
    from transformers import AutoTokenizer

    from atroposlib.testing import tiny_tokenizer_dir

    return AutoTokenizer.from_pretrained(str(tiny_tokenizer_dir()))


@pytest.fixture(scope="module")
def multi_prompt_group(tok):
    rows = [
        sequence(
            tok,
            [
                SYSTEM,
                ("user", "What is 7 + 5?"),
                ("assistant", QUOTED),
                ("tool", "12"),
                ("assistant", " The answer is 12."),
            ],
        ),
        sequence(tok, [SYSTEM, ("user", "What is 9 - 4?"), ("assistant", INDENTED)]),
        # the same question, but the env masked the first assistant turn: training starts later
        sequence(
            tok,
            [
                SYSTEM,
                ("user", "What is 7 + 5?"),
                ("assistant", "calc(7 + 5)"),
                ("tool", "12"),
                ("assistant", "> 12\n   twelve"),
            ],
            train_assistant_from=1,
        ),
    ]
    return group(rows, [1.0, 0.5, -1.0])


def expected(tok, g):
    """Per sequence: (prompt, completion) decoded on each side of its own first trained token."""
    out = []
    for ids, masks in zip(g["tokens"], g["masks"], strict=True):
        k = first_trained(masks)
        out.append((tok.decode(ids[:k]), tok.decode(ids[k:])))
    return out


def assert_cards_show_each_sequence(html: str, tok, g) -> None:
    cards = read_cards(html)
    assert cards.shared_prompt is None, "the prompts differ: none may be shown as shared"
    want = expected(tok, g)
    got = [(s["prompt"], s["completion"]) for s in cards.seqs]
    assert sorted(got) == sorted(want)
    completions = [c for _, c in got]
    assert any(c.startswith(QUOTED) for c in completions)  # '>' line and leading spaces kept
    assert any(c.startswith(INDENTED) for c in completions)
    assert any(c.startswith("> 12\n   twelve") for c in completions)
    # the later-trained sequence shows its own first turn and the tool's output in its prompt
    assert any(
        p.endswith("calc(7 + 5)<|im_end|>\n<|im_start|>tool\n12<|im_end|>\n<|im_start|>assistant\n")
        for p, _ in got
    )
    assert sum("What is 9 - 4?" in p for p, _ in got) == 1


def test_the_report_shows_each_sequence_its_own_prompt_and_text(tok, multi_prompt_group, tmp_path):
    page = write_html_report(
        [multi_prompt_group], tmp_path / "r.html", tokenizer=tok, token_view=True
    ).read_text()
    assert_cards_show_each_sequence(page, tok, multi_prompt_group)
    # every token of every sequence is on the page: the token view starts where its prompt ends
    view = build_view(multi_prompt_group, decode=make_decoder(tok))
    for seq, masks in zip(view.sequences, multi_prompt_group["masks"], strict=True):
        assert seq.completion_start == first_trained(masks)


def test_view_run_shows_each_sequence_its_own_prompt_and_text(tok, multi_prompt_group):
    html, n = render_view(
        [multi_prompt_group], decode=make_decoder(tok), token_text=make_token_text(tok)
    )
    assert n == 1
    assert_cards_show_each_sequence(html, tok, multi_prompt_group)


def test_the_tool_output_in_a_completion_is_marked_untrained(tok, multi_prompt_group):
    html = render_group(build_view(multi_prompt_group, decode=make_decoder(tok)))
    assert '<span class="untrained" title="not trained (masked)">' in html
    untrained = html.split('<span class="untrained"')[1].split("</span>")[0]
    assert "&lt;|im_start|&gt;tool\n12&lt;|im_end|&gt;" in untrained


def test_identical_prompts_are_shown_once(tok):
    turns = [SYSTEM, ("user", "What is 7 + 5?")]
    rows = [sequence(tok, [*turns, ("assistant", a)]) for a in ("> 12", "  13")]
    g = group(rows, [1.0, 0.0])
    cards = read_cards(render_group(build_view(g, decode=make_decoder(tok))))
    k = first_trained(rows[0][1])
    assert cards.shared_prompt == tok.decode(rows[0][0][:k])
    assert [s["prompt"] for s in cards.seqs] == [None, None]
    assert [s["completion"] for s in cards.seqs] == ["> 12<|im_end|>", "  13<|im_end|>"]


def test_without_a_tokenizer_differing_prompts_are_counted_per_sequence(multi_prompt_group):
    html = render_group(build_view(multi_prompt_group))
    assert "shared prompt tokens" not in html
    for masks in multi_prompt_group["masks"]:
        assert f"{first_trained(masks)} prompt tokens of its own" in html


def test_message_text_is_shown_as_text():
    g = {
        "scores": [1.0],
        "messages": [
            [
                {"role": "user", "content": "> quoted\n  indented"},
                {"role": "assistant", "content": "> still quoted\n    code-like\n*not emphasis*"},
            ]
        ],
    }
    html = render_group(build_view(g))
    assert "<blockquote>" not in html and "<em>" not in html
    assert '<pre class="text">&gt; still quoted\n    code-like\n*not emphasis*</pre>' in html
    assert '<pre class="text">&gt; quoted\n  indented</pre>' in html
