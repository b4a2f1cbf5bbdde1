"""Advantages and policy losses of the GRPO trainer, as pure tensor functions.

Notation, per trained token t of a sequence (all tensors are ``[B, T]`` over *target* positions):

* ``logprobs``  log pi_theta(token_t | prefix), with gradient (the trainer's forward pass);
* ``inf_logprobs``  log mu(token_t | prefix) from the inference server that sampled the token: it is
  the behaviour policy (possibly a step or two stale) *and* it carries the numeric mismatch between the
  inference engine and the trainer;
* ``mask``  1.0 where the token is trained on, 0.0 elsewhere (prompt, padding, masked-out groups);
* ``advantages``  A_t (per token; group-relative scores broadcast over the completion).

Losses (``loss_type``), each returning the *sum* over tokens of a per-token objective (weighted by
``sequence_weights`` for sequence-level aggregation); the trainer divides that sum by the whole batch's
``normaliser_for(aggregation)``, so gradient accumulation and data parallelism do not change the mean:

* ``grpo`` (default): r = exp(logprobs - inf_logprobs);
  objective = min(trunc(r) * A, clip(r, 1 - eps_low, 1 + eps_high) * A), where
  trunc(r) has the value min(r, tis_cap) and the gradient of that value (truncated importance
  sampling, TIS: the unclipped branch of a negative-advantage token cannot grow without bound).
  With asymmetric clipping (eps_high > eps_low, "clip-higher") positive-advantage tokens can grow more.
* ``gspo``: the same clipped objective with one sequence-level ratio
  s = exp(mean_t(logprobs - inf_logprobs)) per sequence; each token carries s (value) with its own
  gradient (GSPO-token). Use small eps (e.g. 3e-4 / 4e-4).
* ``cispo``: objective = stopgrad(clip(r, 1 - eps_low, 1 + eps_high)) * A * logprobs: the IS weight is
  clipped but every token keeps its gradient.

Without inference logprobs the ratio is taken against the detached current policy (on-policy: the
value is 1 and the gradient is A * grad log pi). The optional KL term is the k3 estimator
exp(ref - logp) - (ref - logp) - 1, and the optional distillation term is the cross-entropy of the
policy against the teacher's renormalised top-k distribution at each trained token; both take the same
per-token ``weights`` as the policy term, so under every aggregation the three share one scale.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Optional

import torch

_STD_EPS = 1e-6


# ----------------------------------------------------------------------------------------------
# Advantages
# ----------------------------------------------------------------------------------------------
def group_advantages(scores: Sequence[float], mode: str = "grpo") -> list[float]:
    """Group-relative advantages of one group's scores.

    ``grpo``: (s - mean) / (std + eps) with the population std; a group whose scores are all equal gets
    zeros. ``mean_only`` (Dr. GRPO): s - mean.
    """
    if len(scores) == 0:
        return []
    t = torch.tensor(list(scores), dtype=torch.float64)
    centred = t - t.mean()
    if mode == "mean_only":
        out = centred
    elif mode == "grpo":
        out = centred / (t.std(unbiased=False) + _STD_EPS)
    else:
        raise ValueError(f"advantage_mode must be 'grpo' or 'mean_only', got {mode!r}")
    return [float(x) for x in out]


def shuffled_scores(scores: Sequence[float], generator: torch.Generator) -> list[float]:
    """The control experiment: the same scores, randomly permuted within the group."""
    perm = torch.randperm(len(scores), generator=generator).tolist()
    return [float(scores[i]) for i in perm]


# ----------------------------------------------------------------------------------------------
# Per-token log-probabilities
# ----------------------------------------------------------------------------------------------
def token_logprobs(
    logits: torch.Tensor, targets: torch.Tensor, inv_temperature: Optional[torch.Tensor] = None
) -> torch.Tensor:
    """log softmax(logits / T)[target] for ``logits [B, T, V]`` and ``targets [B, T]``, in float32.

    The full-vocabulary path (fp32 ``[B, T, V]`` copies); the trainer uses the chunked
    ``example_trainer.logprobs`` path, which gives the same values and gradients.
    ``inv_temperature [B, T]`` (1 / sampling temperature) scales the logits first."""
    z = logits.float()
    if inv_temperature is not None:
        z = z * inv_temperature.to(z.device, torch.float32).unsqueeze(-1)
    logp = torch.log_softmax(z, dim=-1)
    return logp.gather(-1, targets.clamp_min(0).unsqueeze(-1)).squeeze(-1)


# ----------------------------------------------------------------------------------------------
# Policy losses
# ----------------------------------------------------------------------------------------------
@dataclass
class LossParts:
    """Summed (not yet normalised) loss and the statistics the trainer logs."""

    loss_sum: torch.Tensor  # sum over tokens of the per-token loss (to be divided by a normaliser)
    stats: dict[str, float]  # sums over trained tokens: clipped, ratio, |delta|, kl_est, tokens


def _truncated(ratio: torch.Tensor, cap: float) -> torch.Tensor:
    """Value min(ratio, cap), gradient of that value: ratio * stopgrad(min(1, cap / ratio))."""
    if cap <= 0:
        return ratio
    scale = torch.clamp(cap / ratio.detach(), max=1.0)
    return ratio * scale


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
) -> LossParts:
    """Per-token policy objective summed over ``mask``; see the module docstring for the formulas.

    ``weights`` (default: ``mask``) multiplies each token's loss, e.g. ``sequence_weights(mask)`` for
    sequence-level aggregation.
    """
    mask = mask.to(logprobs.dtype)
    weights = mask if weights is None else weights * mask
    behaviour = inf_logprobs if inf_logprobs is not None else logprobs.detach()
    delta = (logprobs - behaviour) * mask  # zero outside the mask so exp() stays finite there
    if loss_type == "gspo":
        n_tok = mask.sum(-1).clamp_min(1.0)
        seq_log_ratio = delta.sum(-1) / n_tok  # [B]
        seq_ratio = torch.exp(seq_log_ratio).unsqueeze(-1)
        ratio = seq_ratio.detach() * torch.exp(
            logprobs - logprobs.detach()
        )  # value s, grad per token
        per_tok = torch.minimum(
            _truncated(ratio, tis_cap) * advantages,
            torch.clamp(ratio, 1 - eps_low, 1 + eps_high) * advantages,
        )
        ratio_value = seq_ratio.detach().expand_as(logprobs)
    elif loss_type == "grpo":
        ratio = torch.exp(delta)
        per_tok = torch.minimum(
            _truncated(ratio, tis_cap) * advantages,
            torch.clamp(ratio, 1 - eps_low, 1 + eps_high) * advantages,
        )
        ratio_value = ratio.detach()
    elif loss_type == "cispo":
        ratio = torch.exp(delta)
        weight = torch.clamp(ratio.detach(), 1 - eps_low, 1 + eps_high)
        per_tok = weight * advantages * logprobs
        ratio_value = ratio.detach()
    else:
        raise ValueError(f"loss_type must be grpo, gspo or cispo, got {loss_type!r}")

    loss_sum = -(per_tok * weights).sum()
    with torch.no_grad():
        clipped = ((ratio_value < 1 - eps_low) & (advantages < 0)) | (
            (ratio_value > 1 + eps_high) & (advantages > 0)
        )
        d = (logprobs.detach() - behaviour) * mask
        stats = {
            "tokens": float(mask.sum()),
            "clipped": float((clipped.to(mask.dtype) * mask).sum()),
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


def kl_k3(
    logprobs: torch.Tensor,
    ref_logprobs: torch.Tensor,
    mask: torch.Tensor,
    weights: Optional[torch.Tensor] = None,
) -> torch.Tensor:
    """Weighted sum over the mask of the k3 estimator of KL(pi || ref): exp(ref - logp) - (ref - logp) - 1.

    ``weights`` as in ``policy_loss`` (default: the mask; ``sequence_weights`` for sequence aggregation,
    so that the KL is a per-sequence mean on the same scale as the policy term)."""
    w = mask if weights is None else weights * mask
    d = (ref_logprobs - logprobs) * mask
    return ((torch.exp(d) - d - 1) * w).sum()


def distill_loss(
    logits: torch.Tensor,
    teacher_ids: torch.Tensor,
    teacher_logprobs: torch.Tensor,
    mask: torch.Tensor,
    weights: Optional[torch.Tensor] = None,
) -> torch.Tensor:
    """Weighted sum over masked tokens of -sum_k q_k log pi(id_k), q = softmax(teacher top-k logprobs).

    ``logits [B, T, V]``; ``teacher_ids``/``teacher_logprobs``: ``[B, T, K]``; entries with id < 0 are
    padding. The full-vocabulary form of ``distill_from_logprobs``."""
    logp = torch.log_softmax(logits.float(), dim=-1)
    student = logp.gather(-1, teacher_ids.clamp_min(0))
    return distill_from_logprobs(student, teacher_ids, teacher_logprobs, mask, weights)


def distill_from_logprobs(
    student_logprobs: torch.Tensor,
    teacher_ids: torch.Tensor,
    teacher_logprobs: torch.Tensor,
    mask: torch.Tensor,
    weights: Optional[torch.Tensor] = None,
) -> torch.Tensor:
    """``distill_loss`` from the student's log-probabilities at the teacher's ids (``[B, T, K]``)."""
    w = mask if weights is None else weights * mask
    valid = teacher_ids >= 0
    t_logits = torch.where(
        valid, teacher_logprobs.float(), torch.full_like(teacher_logprobs.float(), -1e9)
    )
    q = torch.softmax(t_logits, dim=-1) * valid
    per_tok = -(q * student_logprobs).sum(-1)
    return (per_tok * w).sum()


def sequence_weights(mask: torch.Tensor) -> torch.Tensor:
    """Per-token weights 1 / len(sequence) so that a token-sum becomes a sum of per-sequence means."""
    n = mask.sum(-1, keepdim=True).clamp_min(1.0)
    return mask / n


def normaliser_for(aggregation: str, n_tokens: float, n_sequences: int, seq_len: int) -> float:
    """The denominator of the whole batch: tokens (token), sequences (sequence), seqs x seq_len (constant)."""
    if aggregation == "token":
        return max(n_tokens, 1.0)
    if aggregation == "sequence":
        return float(max(n_sequences, 1))
    if aggregation == "constant":
        return float(max(n_sequences, 1) * seq_len)
    raise ValueError(f"aggregation must be token, sequence or constant, got {aggregation!r}")
