"""The other terms and pieces of the trainer's loss, as pure tensor functions: the KL penalty (k3),
distillation against a teacher's top-k, per-token log-probabilities (full-vocabulary form), sequence
weights and the batch normaliser.

The KL term is the k3 estimator exp(ref - logp) - (ref - logp) - 1, and the distillation term is the
cross-entropy of the policy against the teacher's renormalised top-k distribution at each trained
token; both take the same per-token ``weights`` as the policy term, so under every aggregation the
three share one scale.
"""

from __future__ import annotations

from typing import Optional

import torch


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


__all__ = [
    "distill_from_logprobs",
    "distill_loss",
    "kl_k3",
    "normaliser_for",
    "sequence_weights",
    "token_logprobs",
]
