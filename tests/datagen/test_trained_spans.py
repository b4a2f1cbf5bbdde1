"""SFT/DPO text records say what was trained, and never cut a character in two.

A multi-turn token-only sequence has a tool's output (masked) between two assistant turns: its
record's ``segments`` (``pos_segments`` / ``neg_segments``) label that output untrained, so the text
a trainer learns (the segments labelled true) holds the assistant turns and not the tool's output.
With a byte-level tokenizer an emoji or an accented letter spans several tokens; a first trained
token in the middle of one must not leave U+FFFD in the prefix and the completion: prefix +
completion is the decoded sequence.
"""

from __future__ import annotations

import json

import pytest

from atroposlib.datagen.export import JsonlFeed, run_datagen
from atroposlib.datagen.selection import DpoOptions, SftOptions, select_dpo, select_sft
from atroposlib.report.spans import decoded_spans, split_text
from atroposlib.report.tokenizer import make_decoder
from tests.report.multiturn import IGNORE, encode, group, sequence

TOOL_OUTPUT = "Traceback: division by zero in calc"
REPLACEMENT = "\ufffd"


@pytest.fixture(scope="module")
def tok():
    from transformers import AutoTokenizer

    from atroposlib.testing import tiny_tokenizer_dir

    return AutoTokenizer.from_pretrained(str(tiny_tokenizer_dir()))


def tool_sequence(tok, answer: str):
    return sequence(
        tok,
        [
            ("system", "You can call a calculator."),
            ("user", "What is 12 / 0?"),
            ("assistant", "calc(12 / 0)"),
            ("tool", TOOL_OUTPUT),
            ("assistant", answer),
        ],
    )


@pytest.fixture(scope="module")
def tool_group(tok):
    rows = [tool_sequence(tok, "It is undefined."), tool_sequence(tok, "It is 0.")]
    return group(rows, [1.0, -1.0])


def trained_text(segments) -> str:
    return "".join(s["text"] for s in segments if s["label"])


def test_sft_record_labels_the_tool_output_untrained(tok, tool_group):
    sel = select_sft(tool_group, SftOptions(), make_decoder(tok))
    (rec,) = sel.records
    ids, masks = tool_group["tokens"][0], tool_group["masks"][0]
    assert rec["prefix"] + rec["completion"] == tok.decode(ids)
    assert TOOL_OUTPUT in rec["completion"]  # the text stays whole...
    assert TOOL_OUTPUT not in trained_text(rec["segments"])  # ...but it is not trained
    assert "".join(s["text"] for s in rec["segments"]) == tok.decode(ids)
    assert trained_text(rec["segments"]) == ("calc(12 / 0)<|im_end|>It is undefined.<|im_end|>")
    assert [s["label"] for s in rec["segments"]] == [False, True, False, True]
    # what the segments call trained is exactly what the masks trained
    assert trained_text(rec["segments"]) == tok.decode([t for t in masks if t != IGNORE])


def test_dpo_record_labels_the_tool_output_untrained(tok, tool_group):
    sel = select_dpo(tool_group, DpoOptions(), make_decoder(tok))
    (rec,) = sel.records
    for side, ids in (("pos", tool_group["tokens"][0]), ("neg", tool_group["tokens"][1])):
        assert rec["prefix"] + rec[side] == tok.decode(ids)
        assert "".join(s["text"] for s in rec[f"{side}_segments"]) == rec[side]
        assert TOOL_OUTPUT in rec[side]
        assert TOOL_OUTPUT not in trained_text(rec[f"{side}_segments"])
    assert trained_text(rec["neg_segments"]) == "calc(12 / 0)<|im_end|>It is 0.<|im_end|>"


def test_the_summary_counts_records_with_untrained_text(tok, tool_group, tmp_path):
    src = tmp_path / "groups.jsonl"
    src.write_text(json.dumps(tool_group) + "\n")
    out = tmp_path / "sft.jsonl"
    summary = run_datagen(
        JsonlFeed(src),
        lambda g: select_sft(g, SftOptions(), make_decoder(tok)),
        out,
        "w",
        10,
        progress=False,
    )
    assert summary.untrained_in_completion == 1
    assert summary.as_dict()["records_with_untrained_text_in_completion"] == 1
    assert any("untrained text inside the completion" in line for line in summary.lines("records"))
    rec = json.loads(out.read_text())
    assert TOOL_OUTPUT not in trained_text(rec["segments"])


def split_inside(tok, prompt: str, completion: str, char: str, into: int):
    """(tokens, masks): ``prompt + completion``, trained from the ``into``-th token of ``char``
    (its first occurrence in the completion), so the first trained token cuts that character."""
    head = encode(tok, prompt + completion[: completion.index(char)])
    char_ids = encode(tok, char)
    tail = encode(tok, completion[completion.index(char) + len(char) :])
    assert len(char_ids) > into, "the character must span several tokens"
    ids = head + char_ids + tail
    k = len(head) + into
    assert REPLACEMENT in tok.decode(ids[:k]), "the cut must fall inside the character"
    return ids, [IGNORE] * k + ids[k:]


PROMPT = "<|im_start|>user\nSmile<|im_end|>\n<|im_start|>assistant\n"


@pytest.mark.parametrize("char,into", [("😀", 2), ("😀", 1), ("é", 1)])
def test_a_split_inside_a_character_moves_to_a_clean_boundary(tok, char, into):
    ids, masks = split_inside(tok, PROMPT, f"{char} café déjà vu<|im_end|>", char, into)
    g = group([(ids, masks), (ids, masks)], [1.0, -1.0])
    whole = tok.decode(ids)
    assert REPLACEMENT not in whole
    (rec,) = select_sft(g, SftOptions(), make_decoder(tok)).records
    assert REPLACEMENT not in rec["prefix"] and REPLACEMENT not in rec["completion"]
    assert rec["prefix"] + rec["completion"] == whole
    assert rec["prefix"] == PROMPT and rec["completion"].startswith(char)
    assert "".join(s["text"] for s in rec["segments"]) == whole
    (pair,) = select_dpo(g, DpoOptions(minimum_score_diff_max_min=0.5), make_decoder(tok)).records
    assert pair["prefix"] == PROMPT and pair["prefix"] + pair["pos"] == whole
    assert REPLACEMENT not in pair["pos"] + pair["neg"]


def test_a_trained_stretch_keeps_a_character_whose_bytes_it_partly_holds(tok):
    # the assistant's "é" is cut: its first byte trained, the rest masked with the tool's turn
    text = "caf" + "é"
    ids = encode(tok, PROMPT + text)
    e_ids = encode(tok, "é")
    assert len(e_ids) == 2
    tool = encode(tok, "<|im_end|>\n<|im_start|>tool\nok<|im_end|>")
    ids = ids + tool
    k0 = len(encode(tok, PROMPT))
    k1 = len(ids) - len(tool) - 1  # the last byte of "é" is masked
    masks = [IGNORE] * k0 + ids[k0:k1] + [IGNORE] * (len(ids) - k1)
    spans = decoded_spans(ids, masks, make_decoder(tok))
    assert "".join(s.text for s in spans) == tok.decode(ids)
    assert [(s.text, s.trained) for s in spans][1] == ("café", True)
    assert all(REPLACEMENT not in s.text for s in spans)
    before, after, cut = split_text(ids, k0 + 4, make_decoder(tok))  # inside "é"
    assert (before, cut) == (PROMPT + "caf", k0 + 3) and before + after == tok.decode(ids)


def test_a_sentencepiece_completion_keeps_its_leading_space():
    """A SentencePiece-style tokenizer (Metaspace) drops the leading space of a piece decoded on its
    own; the completion is cut out of the whole decoded text, so it keeps it."""
    from tokenizers import SentencePieceBPETokenizer
    from transformers import PreTrainedTokenizerFast

    from atroposlib.inference.tiny_model import default_corpus

    sp = SentencePieceBPETokenizer()
    sp.train_from_iterator(default_corpus(0, 300), vocab_size=300, show_progress=False)
    tok = PreTrainedTokenizerFast(tokenizer_object=sp)
    prompt = encode(tok, "The answer is")
    ids = encode(tok, "The answer is 12 and more")
    assert ids[: len(prompt)] == prompt and not tok.decode(ids[len(prompt) :]).startswith(" ")
    masks = [IGNORE] * len(prompt) + ids[len(prompt) :]
    g = group([(ids, masks), (ids, masks)], [1.0, -1.0])
    (rec,) = select_sft(g, SftOptions(), make_decoder(tok)).records
    assert (rec["prefix"], rec["completion"]) == ("The answer is", " 12 and more")
