"""``gspo``: the clipped objective with one sequence-level ratio s = exp(mean_t(delta)) per sequence;
each token carries s as its value with its own gradient (GSPO-token). Use small eps (3e-4 / 4e-4)."""

from __future__ import annotations

import torch

from example_trainer.losses.objective import ObjectiveTerms, RatioInputs, clipped_surrogate


def gspo(x: RatioInputs) -> ObjectiveTerms:
    n_tok = x.mask.sum(-1).clamp_min(1.0)
    seq_ratio = torch.exp(x.delta.sum(-1) / n_tok).unsqueeze(-1)  # [B, 1]
    # value s, gradient per token
    ratio = seq_ratio.detach() * torch.exp(x.logprobs - x.logprobs.detach())
    return ObjectiveTerms(
        per_token=clipped_surrogate(ratio, x), ratio=seq_ratio.detach().expand_as(x.logprobs)
    )


__all__ = ["gspo"]
