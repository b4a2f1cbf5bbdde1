"""atroposlib.envkit.distill: top-k bookkeeping of the prefixes method (token text -> id)."""

from transformers import AutoTokenizer

from atroposlib.envkit.distill import text_to_id, top_k_entry
from atroposlib.testing import tiny_tokenizer_dir


def test_top_k_helpers():
    assert top_k_entry({"a": -2.0, "b": -0.1, "zz": -0.2}, {"a": 1, "b": 2}, 3) == (
        [2, 1],
        [-0.1, -2.0],
    )


def test_text_to_id():
    small = AutoTokenizer.from_pretrained(str(tiny_tokenizer_dir()))
    ids = text_to_id(small)
    assert all(small.decode([tid]) == text for text, tid in list(ids.items())[:50])
