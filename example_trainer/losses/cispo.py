"""``cispo``: stopgrad(clip(r, 1 - eps_low, 1 + eps_high)) * A * logprobs: the importance weight is
clipped, but every token keeps its gradient."""

from __future__ import annotations

import torch

from example_trainer.losses.objective import ObjectiveTerms, RatioInputs


def cispo(x: RatioInputs) -> ObjectiveTerms:
    ratio = torch.exp(x.delta)
    weight = torch.clamp(ratio.detach(), 1 - x.eps_low, 1 + x.eps_high)
    return ObjectiveTerms(per_token=weight * x.advantages * x.logprobs, ratio=ratio.detach())


__all__ = ["cispo"]
