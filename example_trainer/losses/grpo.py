"""``grpo`` (the default): a per-token ratio r = exp(logprobs - inf_logprobs) in the clipped objective
min(trunc(r) * A, clip(r, 1 - eps_low, 1 + eps_high) * A), with truncated importance sampling."""

from __future__ import annotations

import torch

from example_trainer.losses.objective import ObjectiveTerms, RatioInputs, clipped_surrogate


def grpo(x: RatioInputs) -> ObjectiveTerms:
    ratio = torch.exp(x.delta)
    return ObjectiveTerms(per_token=clipped_surrogate(ratio, x), ratio=ratio.detach())


__all__ = ["grpo"]
