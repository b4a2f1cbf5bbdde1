"""envkit.distill: tokenizer identity check and top-k bookkeeping."""

import pytest
from envkit.distill import (
    check_same_tokenizer,
    positions_to_score,
    text_to_id,
    top_k_entry,
    top_k_from_prompt_logprobs,
)
from transformers import AutoTokenizer

from atroposlib.errors import TokenizerMismatch
from atroposlib.testing import tiny_tokenizer_dir


def test_top_k_helpers():
    entry = {
        "7": {"logprob": -3.0, "rank": 9},
        "2": {"logprob": -0.5, "rank": 1},
        "5": {"logprob": -1.0, "rank": 2},
    }
    assert top_k_from_prompt_logprobs(entry, 2) == ([2, 5], [-0.5, -1.0])
    assert top_k_entry({"a": -2.0, "b": -0.1, "zz": -0.2}, {"a": 1, "b": 2}, 3) == (
        [2, 1],
        [-0.1, -2.0],
    )
    assert positions_to_score([-100, -100, 5, 6, -100, 7]) == [2, 3, 5]


def test_tokenizer_identity(tiny_model_dir):
    small = AutoTokenizer.from_pretrained(str(tiny_tokenizer_dir()))
    same = AutoTokenizer.from_pretrained(str(tiny_tokenizer_dir()))
    check_same_tokenizer(small, same, "a", "b")  # identical: no error
    other = AutoTokenizer.from_pretrained(str(tiny_model_dir))
    with pytest.raises(
        TokenizerMismatch, match=r"teacher tokenizer T \(\d+ tokens\) differs from the student's S"
    ):
        check_same_tokenizer(small, other, "S", "T")
    ids = text_to_id(small)
    assert all(small.decode([tid]) == text for text, tid in list(ids.items())[:50])
