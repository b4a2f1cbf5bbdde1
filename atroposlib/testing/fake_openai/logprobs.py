"""The fake server's logprobs: a deterministic number per (token, position), vLLM's prompt
candidates built from it, and the shapes an answer carries them in (completions, chat, SGLang)."""

from __future__ import annotations

import hashlib
import itertools
from collections.abc import Sequence
from typing import Any, Optional


def fake_logprob(token_id: int, position: int) -> float:
    """Deterministic logprob in [-3, -0.01) for a token at a position."""
    h = hashlib.sha256(f"{token_id}:{position}".encode()).digest()
    return -0.01 - 2.99 * (int.from_bytes(h[:4], "big") / 2**32)


def fake_prompt_candidates(prompt_ids: Sequence[int], position: int, k: int) -> list[int]:
    """The k token ids the fake server ranks first at ``position`` of a prompt: the prompt's own
    token, then the ids after it (a deterministic stand-in for a teacher's top-k)."""
    return [prompt_ids[position] + j for j in range(max(1, k))]


def fake_prompt_logprobs(prompt_ids: Sequence[int], k: int) -> list[Optional[dict[str, Any]]]:
    """vLLM's ``prompt_logprobs`` rows for a prompt (see ``fake_prompt_candidates``)."""
    rows: list[Optional[dict[str, Any]]] = [None]
    for p in range(1, len(prompt_ids)):
        ids = fake_prompt_candidates(prompt_ids, p, k)
        lps = sorted((fake_logprob(t, p) for t in ids), reverse=True)
        rows.append(
            {
                str(t): {"logprob": lp, "rank": r + 1}
                for r, (t, lp) in enumerate(zip(ids, lps, strict=True))
            }
        )
    return rows


def completion_logprobs(
    tokenizer: Any, ids: Sequence[int], start: int, gaps: bool
) -> dict[str, Any]:
    """``/v1/completions``' ``logprobs`` block for generated ``ids`` that follow ``start`` prompt
    tokens; ``gaps``: the first token's logprob is ``None``."""
    toks = [tokenizer.decode([t], skip_special_tokens=False) for t in ids]
    lps: list[Optional[float]] = [fake_logprob(t, start + j) for j, t in enumerate(ids)]
    if gaps and lps:
        lps[0] = None
    return {
        "tokens": toks,
        "token_logprobs": lps,
        "top_logprobs": [{tk: lp} for tk, lp in zip(toks, lps, strict=True)],
        "text_offset": list(itertools.accumulate([0] + [len(t) for t in toks[:-1]])),
    }


def chat_logprobs(tokenizer: Any, ids: Sequence[int], start: int) -> dict[str, Any]:
    """``/v1/chat/completions``' ``logprobs`` block (``content`` rows) for generated ``ids``."""
    return {
        "content": [
            {
                "token": tokenizer.decode([t], skip_special_tokens=False),
                "bytes": None,
                "logprob": fake_logprob(t, start + j),
                "top_logprobs": [],
            }
            for j, t in enumerate(ids)
        ]
    }


def sglang_logprobs(ids: Sequence[int], start: int, gaps: bool) -> list[list[Any]]:
    """SGLang's ``meta_info.output_token_logprobs``: ``[logprob, token id, None]`` per token."""
    rows: list[list[Any]] = [[fake_logprob(t, start + j), t, None] for j, t in enumerate(ids)]
    if gaps and ids:
        rows[0][0] = None
    return rows


__all__ = [
    "chat_logprobs",
    "completion_logprobs",
    "fake_logprob",
    "fake_prompt_candidates",
    "fake_prompt_logprobs",
    "sglang_logprobs",
]
