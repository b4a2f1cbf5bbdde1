"""The HTML report and its building blocks: escaping, group views, JSONL reading, token spans."""

from __future__ import annotations

import json
import re
from html.parser import HTMLParser
from pathlib import Path

import pytest

from atroposlib.errors import SchemaError
from atroposlib.report.groups import (
    LoadStats,
    build_view,
    iter_groups,
    iter_groups_jsonl,
    shared_message_prefix,
    unwrap_record,
)
from atroposlib.report.html import write_html_report
from atroposlib.report.render import render_text, render_token_spans
from atroposlib.viewer.samples import HOSTILE_COMPLETION, sample_groups


def byte_decode(ids):
    return bytes(ids).decode("utf-8", "replace")


class TagCollector(HTMLParser):
    """Every start tag with its attributes, as a browser's parser would see them."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict]] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))


def parse_tags(html: str) -> list[tuple[str, dict]]:
    p = TagCollector()
    p.feed(html)
    return p.tags


def test_text_is_escaped_and_kept_as_written():
    text = "**bold** <script>alert(1)</script> [x](javascript:alert(1))\n> quote\n  two spaces"
    out = render_text(text)
    assert out == (
        '<pre class="text">**bold** &lt;script&gt;alert(1)&lt;/script&gt; '
        "[x](javascript:alert(1))\n&gt; quote\n  two spaces</pre>"
    )
    assert {t for t, _ in parse_tags(out)} == {"pre"}  # no <script>, <a>, <strong>, <blockquote>


def test_report_escapes_hostile_completion_and_has_one_script(tmp_path):
    path = write_html_report(sample_groups(), tmp_path / "r.html", title="T <b>itle</b>")
    html = path.read_text()
    tags = parse_tags(html)
    scripts = [a for t, a in tags if t == "script"]
    assert len(scripts) == 1 and "nonce" in scripts[0]  # only ours, allowed by the CSP nonce
    assert not any(t == "img" for t, _ in tags)  # the hostile <img onerror> stayed text
    assert not any(k.startswith("on") for _, a in tags for k in a)  # no event-handler attributes
    assert "&lt;script&gt;window.__pwned = 1" in html
    assert "<title>T &lt;b&gt;itle&lt;/b&gt;</title>" in html
    csp = next(
        a["content"]
        for t, a in tags
        if t == "meta" and a.get("http-equiv") == "Content-Security-Policy"
    )
    assert "script-src 'nonce-" in csp and "default-src 'none'" in csp


def test_report_structure_scores_and_prompt(tmp_path):
    groups = sample_groups()
    html = write_html_report(groups, tmp_path / "r.html").read_text()
    tags = parse_tags(html)
    details = [a for t, a in tags if t == "details" and "group" in a.get("class", "")]
    assert len(details) == len(groups)
    assert {a["data-env"] for a in details} == {"arithmetic", "arithmetic_hard"}
    seq_scores = [float(a["data-score"]) for t, a in tags if t == "div" and "data-score" in a]
    assert seq_scores == [s for g in groups for s in g["scores"]]
    # the shared prompt is shown once per group, not once per completion
    assert html.count("What is 7 + 5?") == 1
    assert "nine (9)" in html


def test_report_reads_jsonl_and_counts_bad_lines(tmp_path):
    src = tmp_path / "g.jsonl"
    lines = [json.dumps(g) for g in sample_groups()[:2]]
    lines.insert(1, "{not json")
    lines.append(json.dumps({"no": "scores"}))
    lines.append(
        json.dumps({"seq": 7, "env_name": "peeked", "state": "queued", "group": sample_groups()[2]})
    )
    src.write_text("\n".join(lines) + "\n\n")
    stats = LoadStats()
    html = write_html_report(src, tmp_path / "out" / "g.html", stats=stats).read_text()
    assert stats.groups == 3 and stats.lines == 5
    assert stats.skipped == {"invalid JSON": 1, "not a scored group": 1}
    assert "Group #7" in html and 'data-env="peeked"' in html
    with pytest.raises(FileNotFoundError):
        list(iter_groups_jsonl(tmp_path / "missing.jsonl"))


def test_empty_input_gives_a_page_saying_so(tmp_path):
    html = write_html_report([], tmp_path / "e.html").read_text()
    assert "No groups to show." in html


def test_groups_without_messages_show_token_info_or_decoded_text(tmp_path):
    g = sample_groups(with_messages=False)[0]
    view = build_view(g)
    assert view.prompt_messages == [] and view.prompt_token_count > 0
    html = write_html_report([g], tmp_path / "a.html").read_text()
    assert "no messages and no tokenizer given" in html
    decoded = build_view(g, decode=byte_decode)
    assert decoded.prompt_text.endswith("<|im_start|>assistant\n")
    assert decoded.sequences[1].completion_text == "The answer is **12**.<|im_end|>"


def test_report_with_a_real_tokenizer_decodes(tmp_path):
    from atroposlib.inference.tiny_model import build_tokenizer, default_corpus

    tok = build_tokenizer(default_corpus(0, 200), vocab_size=300)
    g = sample_groups(
        encode=lambda s: tok.encode(s, add_special_tokens=False), with_messages=False
    )[1]
    html = write_html_report([g], tmp_path / "t.html", tokenizer=tok, token_view=True).read_text()
    assert "What is 9 - 4?" in html and "It is 5" in html
    assert 'class="tok tok-trained"' in html


def test_shared_prefix_of_conversations():
    a = [{"role": "user", "content": "q"}, {"role": "assistant", "content": "1"}]
    b = [{"role": "user", "content": "q"}, {"role": "assistant", "content": "2"}]
    assert shared_message_prefix([a, b]) == 1
    assert shared_message_prefix([a, a]) == 1  # identical: the last turn stays a completion
    assert shared_message_prefix([a]) == 1
    assert shared_message_prefix([]) == 0


def test_unwrap_records():
    g = sample_groups()[0]
    assert unwrap_record(g) == [g]
    assert unwrap_record({"batch": [g, g]}) == [g, g]
    peeked = unwrap_record({"seq": 3, "env_name": "e", "group": {"scores": [1.0], "tokens": [[1]]}})
    assert peeked[0]["seq"] == 3 and peeked[0]["env_name"] == "e"
    with pytest.raises(SchemaError):
        unwrap_record(42)
    assert len(list(iter_groups([g, {"batch": [g]}]))) == 2


def test_token_spans_colour_by_mask_logprob_and_advantage():
    g = {
        "tokens": [[60, 62, 49, 50]],
        "masks": [[-100, -100, 49, 50]],
        "scores": [1.0],
        "inference_logprobs": [[1.0, 1.0, -0.01, -4.0]],
        "advantages": [[0.0, 0.0, 0.5, -0.5]],
    }
    seq = build_view(g).sequences[0]
    html = render_token_spans(seq, token_text=lambda t: chr(t))
    spans = [a for t, a in parse_tags(html) if t == "span"]
    assert [s["class"] for s in spans] == ["tok tok-masked"] * 2 + ["tok tok-trained"] * 2
    assert "&lt;" in html and "<<" not in html  # token text '<' escaped
    hues = [int(re.search(r"hsl\((\d+)", s["style"]).group(1)) for s in spans[2:]]
    assert hues[0] > 100 > 20 > hues[1]  # likely token green, unlikely red
    assert "130" in spans[2]["style"] and "hsl(0" in spans[3]["style"].split("border-bottom")[1]
    assert "logprob -4.000" in spans[3]["title"] and "advantage -0.500" in spans[3]["title"]


def test_hostile_sample_is_really_hostile():
    # guards the browser tests: the sample must contain live markup if it were not escaped
    assert "<script>" in HOSTILE_COMPLETION and "onerror=" in HOSTILE_COMPLETION
    assert Path(__file__).exists()


def test_a_malformed_group_becomes_an_error_card_not_a_broken_page(tmp_path, caplog):
    bad = {"scores": {"not": "a list"}, "tokens": "abc"}
    html = write_html_report([bad, sample_groups()[1]], tmp_path / "m.html").read_text()
    assert "could not be shown: KeyError" in html and "It is 5" in html
    assert "group 0 could not be rendered" in caplog.text
