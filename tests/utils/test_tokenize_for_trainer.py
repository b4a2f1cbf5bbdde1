"""tokenize_for_trainer with a real (tiny, locally built) tokenizer and its ChatML template."""

from __future__ import annotations

import pytest

from atroposlib.testing import tiny_tokenizer_dir
from atroposlib.utils.tokenize_for_trainer import tokenize_for_trainer
from atroposlib.utils.tokenizer_loading import load_tokenizer


@pytest.fixture(scope="module")
def tok():
    return load_tokenizer(str(tiny_tokenizer_dir()))


CHAT = [
    {"role": "system", "content": "be brief"},
    {"role": "user", "content": "2+2?"},
    {"role": "assistant", "content": "4"},
    {"role": "user", "content": "and 3+3?"},
    {"role": "assistant", "content": "6"},
]


def _trained_text(tok, out):
    return tok.decode([t for t, m in zip(out["tokens"], out["masks"], strict=True) if m != -100])


def test_only_last_assistant_turn_is_trained_by_default(tok):
    out = tokenize_for_trainer(tok, CHAT)
    full = tok.encode(tok.apply_chat_template(CHAT, tokenize=False), add_special_tokens=False)
    assert out["tokens"] == full and len(out["masks"]) == len(full)
    assert _trained_text(tok, out) == "6<|im_end|>\n"
    assert all(m in (-100, t) for m, t in zip(out["masks"], out["tokens"], strict=True))


def test_all_assistant_turns_and_messages(tok):
    out = tokenize_for_trainer(tok, CHAT, include_messages=True, train_on_all_assistant_turns=True)
    assert _trained_text(tok, out) == "4<|im_end|>\n6<|im_end|>\n"
    assert out["messages"] == CHAT


def test_length_cut_generation_has_no_end_of_turn(tok):
    out = tokenize_for_trainer(tok, CHAT, finish_reason="length")
    assert _trained_text(tok, out) == "6"
    assert tok.decode(out["tokens"]).endswith("<|im_start|>assistant\n6")


def test_agent_role_counts_as_assistant_and_last_message_is_trained(tok):
    chat = [
        {"role": "user", "content": "go"},
        {"role": "agent", "content": "ok"},
        {"role": "user", "content": "again"},
    ]
    all_turns = tokenize_for_trainer(tok, chat, train_on_all_assistant_turns=True)
    assert _trained_text(tok, all_turns) == "ok<|im_end|>\n"
    assert _trained_text(tok, tokenize_for_trainer(tok, chat)) == "again<|im_end|>\n"
