"""The GRPO trainer's loss, as pure tensor functions: one module per policy loss (``grpo``, ``gspo``,
``cispo``, registered in ``registry.py``), the shared policy term (``policy``), the other terms
(``terms``: KL, distillation, log-probabilities, weights, normaliser) and the advantages.

A new loss is one new module here with a ``PolicyObjective`` function and one line in ``registry.py``.
"""

from example_trainer.losses.advantages import group_advantages, shuffled_scores
from example_trainer.losses.policy import LossParts, policy_loss
from example_trainer.losses.registry import OBJECTIVES
from example_trainer.losses.terms import (
    distill_from_logprobs,
    distill_loss,
    kl_k3,
    normaliser_for,
    sequence_weights,
    token_logprobs,
)

__all__ = [
    "OBJECTIVES",
    "LossParts",
    "distill_from_logprobs",
    "distill_loss",
    "group_advantages",
    "kl_k3",
    "normaliser_for",
    "policy_loss",
    "sequence_weights",
    "shuffled_scores",
    "token_logprobs",
]
