"""Per-row sampling parameters and the vectorised next-token sampler used by the generation loop.

Every row of a batch carries its own temperature / top-p / top-k and its own ``torch.Generator`` (seeded
from the request's ``seed`` when given), so a row samples the same tokens whether it runs alone or inside
a batch. Sampling is inverse-CDF over the filtered distribution with one uniform draw per row per step.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Optional

import torch


@dataclass
class RowParams:
    """What one generated sequence (one row of a batch) asks for."""

    prompt_ids: list[int]
    max_tokens: int
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0
    stop: list[str] = field(default_factory=list)
    seed: Optional[int] = None
    top_logprobs: int = 0
    ignore_eos: bool = False
    prompt_logprobs: Optional[int] = None
    adapter: Optional[str] = None

    def make_generator(self) -> torch.Generator:
        g = torch.Generator()
        g.manual_seed(self.seed if self.seed is not None else random.getrandbits(63))
        return g


def sample_next(
    logits: torch.Tensor,
    temperature: torch.Tensor,
    top_p: torch.Tensor,
    top_k: torch.Tensor,
    generators: list[torch.Generator],
) -> torch.Tensor:
    """Pick one token per row. ``logits`` [B, V] float32; ``temperature``/``top_p`` [B] float;
    ``top_k`` [B] long (0 = off). Rows with temperature 0 take the argmax. Returns [B] long."""
    greedy = temperature <= 0
    choice = logits.argmax(dim=-1)
    if bool(greedy.all()):
        return choice
    temp = torch.where(greedy, torch.ones_like(temperature), temperature)
    scaled = logits / temp.unsqueeze(-1)
    sorted_logits, sorted_idx = scaled.sort(dim=-1, descending=True)
    vocab = logits.shape[-1]
    ranks = torch.arange(vocab, device=logits.device).unsqueeze(0)
    k = torch.where(top_k > 0, top_k.clamp(max=vocab), torch.full_like(top_k, vocab))
    sorted_logits = sorted_logits.masked_fill(ranks >= k.unsqueeze(-1), float("-inf"))
    probs = torch.softmax(sorted_logits, dim=-1)
    # top-p: keep the smallest prefix whose mass reaches top_p (always keep the first token).
    before = probs.cumsum(dim=-1) - probs
    probs = probs.masked_fill(before >= top_p.unsqueeze(-1), 0.0)
    cdf = probs.cumsum(dim=-1)
    # the generators are CPU ones (seeded per row); their draws go to the logits' device
    u = torch.stack([torch.rand((), generator=g) for g in generators]).to(cdf.device) * cdf[:, -1]
    pos = torch.searchsorted(cdf, u.unsqueeze(-1)).squeeze(-1).clamp(max=vocab - 1)
    sampled = sorted_idx.gather(-1, pos.unsqueeze(-1)).squeeze(-1)
    return torch.where(greedy, choice, sampled)


__all__ = ["RowParams", "sample_next"]
