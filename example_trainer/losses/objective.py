"""What one policy loss is: a function from the per-token ratio inputs to the per-token objective.

A loss (``loss_type``) is one module in this package with one ``PolicyObjective`` function, registered
by one line in ``registry.py``. ``policy.policy_loss`` does the rest (masking, weights, the summed loss
and the statistics the trainer logs), the same for every loss.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import torch


@dataclass(frozen=True)
class RatioInputs:
    """What every objective may use, all ``[B, T]`` over target positions.

    ``logprobs``: log pi_theta(token), with gradient; ``delta``: logprobs - behaviour log-probs, zero
    outside the mask (so ``exp`` stays finite there); ``advantages``: A_t; ``mask``: 1.0 where trained.
    """

    logprobs: torch.Tensor
    delta: torch.Tensor
    advantages: torch.Tensor
    mask: torch.Tensor
    eps_low: float
    eps_high: float
    tis_cap: float


@dataclass(frozen=True)
class ObjectiveTerms:
    """``per_token``: the objective to maximise at each token (the loss is minus its weighted sum);
    ``ratio``: the detached importance ratio each token carries, for the clip statistics."""

    per_token: torch.Tensor
    ratio: torch.Tensor


class PolicyObjective(Protocol):
    def __call__(self, x: RatioInputs) -> ObjectiveTerms: ...


def truncated(ratio: torch.Tensor, cap: float) -> torch.Tensor:
    """Value min(ratio, cap), gradient of that value: ratio * stopgrad(min(1, cap / ratio))."""
    if cap <= 0:
        return ratio
    scale = torch.clamp(cap / ratio.detach(), max=1.0)
    return ratio * scale


def clipped_surrogate(ratio: torch.Tensor, x: RatioInputs) -> torch.Tensor:
    """min(trunc(r) * A, clip(r, 1 - eps_low, 1 + eps_high) * A), the PPO-style objective with TIS."""
    return torch.minimum(
        truncated(ratio, x.tis_cap) * x.advantages,
        torch.clamp(ratio, 1 - x.eps_low, 1 + x.eps_high) * x.advantages,
    )


__all__ = ["ObjectiveTerms", "PolicyObjective", "RatioInputs", "clipped_surrogate", "truncated"]
