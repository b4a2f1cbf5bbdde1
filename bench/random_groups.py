"""Random scored groups for the trainer benchmarks: real shapes, no model or data needed.

The benchmarks run as scripts (``python bench/x.py``), so this folder is on ``sys.path``.
"""

from __future__ import annotations

from typing import Any


def random_groups(
    tokens: int, seq_len: int, vocab: int, seed: int, inference_logprobs: bool = False
) -> list[dict[str, Any]]:
    """``tokens // seq_len`` sequences of ``seq_len`` random tokens (a quarter of each is prompt,
    masked out) in groups of 2 scored 0 and 1 (a last lone sequence scores 1); with
    ``inference_logprobs``, each token carries a logprob of -5."""
    import torch

    g = torch.Generator().manual_seed(seed)
    n = max(1, tokens // seq_len)
    prompt = seq_len // 4
    groups = []
    for i in range(0, n, 2):
        size = min(2, n - i)
        toks = [torch.randint(3, vocab, (seq_len,), generator=g).tolist() for _ in range(size)]
        group: dict[str, Any] = {
            "tokens": toks,
            "masks": [[-100] * prompt + t[prompt:] for t in toks],
            "scores": [float(j % 2) for j in range(size)] if size > 1 else [1.0],
        }
        if inference_logprobs:
            group["inference_logprobs"] = [[-5.0] * seq_len for _ in toks]
        groups.append(group)
    return groups


__all__ = ["random_groups"]
