"""The policy term of the GRPO trainer's loss: masking, weights, the summed loss and its statistics.

Notation, per trained token t of a sequence (all tensors are ``[B, T]`` over *target* positions):

* ``logprobs``  log pi_theta(token_t | prefix), with gradient (the trainer's forward pass);
* ``inf_logprobs``  log mu(token_t | prefix) from the inference server that sampled the token: it is
  the behaviour policy (possibly a step or two stale) *and* it carries the numeric mismatch between the
  inference engine and the trainer;
* ``mask``  1.0 where the token is trained on, 0.0 elsewhere (prompt, padding, masked-out groups);
* ``advantages``  A_t (per token; group-relative scores broadcast over the completion).

The per-token objective is the loss's own (``loss_type``, a module of this package per loss, see
``registry.py``: ``grpo`` the default, ``gspo``, ``cispo``). Its ratio is taken against
``clip_reference``:

* ``behaviour``: r = pi_theta / mu, the sampler's log-probabilities, clipped to
  [1 - eps_low, 1 + eps_high] and truncated at ``tis_cap``. A token whose probability the policy has
  already moved past the clip since the (stale) sample was drawn gets no gradient;
* ``proximal`` (decoupled PPO): r = pi_theta / pi_prox, pi_prox the trainer's weights at the start of
  the step (the detached current policy: the trainer takes one optimizer step per batch, so r is 1
  and the clip bounds nothing within it), times a separate importance weight
  w = min(pi_prox / mu, tis_cap), detached, that corrects for the sampler's staleness and numerics:
  the objective w * A * log pi_theta. TRL's GRPOTrainer with vLLM does the same (its clip against the
  trainer's own old log-probabilities, vLLM's mismatch as a truncated weight); so does AReaL.
  ``cispo`` keeps its own clipped weight against mu (it is that weight) and ignores the setting. ``policy_loss`` returns the *sum* over
tokens of it (weighted by ``sequence_weights`` for sequence-level aggregation); the trainer divides that
sum by the whole batch's ``normaliser_for(aggregation)``, so gradient accumulation and data parallelism
do not change the mean. Without inference logprobs the ratio is taken against the detached current
policy (on-policy: the value is 1 and the gradient is A * grad log pi).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import torch

from example_trainer.losses.objective import RatioInputs
from example_trainer.losses.registry import objective


@dataclass
class LossParts:
    """Summed (not yet normalised) loss and the statistics the trainer logs."""

    loss_sum: torch.Tensor  # sum over tokens of the per-token loss (to be divided by a normaliser)
    stats: dict[str, float]  # sums over trained tokens: clipped, ratio, |delta|, kl_est, tokens


def policy_loss(
    logprobs: torch.Tensor,
    inf_logprobs: Optional[torch.Tensor],
    advantages: torch.Tensor,
    mask: torch.Tensor,
    *,
    loss_type: str = "grpo",
    eps_low: float = 0.2,
    eps_high: float = 0.28,
    tis_cap: float = 2.0,
    weights: Optional[torch.Tensor] = None,
    clip_reference: str = "behaviour",
) -> LossParts:
    """Per-token policy objective of ``loss_type`` summed over ``mask``.

    ``weights`` (default: ``mask``) multiplies each token's loss, e.g. ``sequence_weights(mask)`` for
    sequence-level aggregation. ``clip_reference``: ``behaviour`` or ``proximal`` (module docstring).
    """
    compute = objective(loss_type)
    mask = mask.to(logprobs.dtype)
    weights = mask if weights is None else weights * mask
    behaviour = inf_logprobs if inf_logprobs is not None else logprobs.detach()
    delta = (logprobs - behaviour) * mask  # zero outside the mask so exp() stays finite there
    if clip_reference == "proximal" and loss_type != "cispo":
        proximal = (logprobs - logprobs.detach()) * mask  # value 0: r = 1, gradient of log pi
        terms = compute(RatioInputs(logprobs, proximal, advantages, mask, eps_low, eps_high, 0.0))
        is_weight = torch.exp(delta.detach())
        capped = is_weight > tis_cap if tis_cap > 0 else torch.zeros_like(mask, dtype=torch.bool)
        if tis_cap > 0:
            is_weight = is_weight.clamp(max=tis_cap)
        per_tok = terms.per_token * is_weight
        clip_ratio, ratio_value = terms.ratio, torch.exp(delta.detach())
    elif clip_reference in ("behaviour", "proximal"):
        terms = compute(RatioInputs(logprobs, delta, advantages, mask, eps_low, eps_high, tis_cap))
        per_tok, ratio_value = terms.per_token, terms.ratio
        clip_ratio = ratio_value
        capped = (
            (ratio_value > tis_cap) if tis_cap > 0 else torch.zeros_like(mask, dtype=torch.bool)
        )
    else:
        raise ValueError(f"clip_reference must be proximal or behaviour, got {clip_reference!r}")

    loss_sum = -(per_tok * weights).sum()
    with torch.no_grad():
        clipped = ((clip_ratio < 1 - eps_low) & (advantages < 0)) | (
            (clip_ratio > 1 + eps_high) & (advantages > 0)
        )
        d = (logprobs.detach() - behaviour) * mask
        stats = {
            "tokens": float(mask.sum()),
            "clipped": float((clipped.to(mask.dtype) * mask).sum()),
            # tokens whose importance weight against the sampler hit tis_cap
            "capped": float((capped.to(mask.dtype) * mask).sum()),
            "ratio_sum": float((ratio_value * mask).sum()),
            "ratio_max": float((ratio_value * mask).max()) if mask.any() else 0.0,
            "ratio_min": float(
                torch.where(mask > 0, ratio_value, torch.full_like(ratio_value, float("inf"))).min()
            )
            if mask.any()
            else 0.0,
            "abs_delta_sum": float(d.abs().sum()),
            # k3 estimate of KL(mu || pi) from samples of mu: exp(d) - d - 1 with d = log pi - log mu
            "mismatch_kl_sum": float(((torch.exp(d) - d - 1) * mask).sum()),
        }
    return LossParts(loss_sum=loss_sum, stats=stats)


__all__ = ["LossParts", "policy_loss"]
