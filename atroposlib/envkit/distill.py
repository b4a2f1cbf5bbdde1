"""Pure helpers for the prefixes method of teacher distillation: OpenAI-shaped ``top_logprobs`` are
keyed by decoded token text, and these map them back to the student's token ids.

Distillation arrays are per sequence, per token: ``distill_token_ids[i][p]`` and ``distill_logprobs[i][p]``
are the teacher's top-k next-token ids and logprobs for the distribution that predicted token ``p``.
"""

from __future__ import annotations

from typing import Any


def text_to_id(tokenizer: Any) -> dict[str, int]:
    """Decoded text of each single token -> its id (the lowest id wins when two decode alike)."""
    mapping: dict[str, int] = {}
    for token_id in sorted(tokenizer.get_vocab().values()):
        mapping.setdefault(tokenizer.decode([token_id], skip_special_tokens=False), token_id)
    return mapping


def top_k_entry(
    top_logprobs: dict[str, float], ids: dict[str, int], k: int
) -> tuple[list[int], list[float]]:
    """The k most likely (id, logprob) pairs of one position, most likely first."""
    ranked = sorted(top_logprobs.items(), key=lambda kv: kv[1], reverse=True)[:k]
    pairs = [(ids[text], float(lp)) for text, lp in ranked if text in ids]
    return [p[0] for p in pairs], [p[1] for p in pairs]
