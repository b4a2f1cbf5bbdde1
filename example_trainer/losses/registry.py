"""The policy losses by ``loss_type`` name: one line per loss module of this package."""

from __future__ import annotations

from example_trainer.losses.cispo import cispo
from example_trainer.losses.grpo import grpo
from example_trainer.losses.gspo import gspo
from example_trainer.losses.objective import PolicyObjective

OBJECTIVES: dict[str, PolicyObjective] = {
    "grpo": grpo,
    "gspo": gspo,
    "cispo": cispo,
}


def objective(loss_type: str) -> PolicyObjective:
    """The objective named ``loss_type``; ``ValueError`` naming the known ones otherwise."""
    try:
        return OBJECTIVES[loss_type]
    except KeyError:
        raise ValueError(
            f"loss_type must be one of {', '.join(OBJECTIVES)}, got {loss_type!r}"
        ) from None


__all__ = ["OBJECTIVES", "objective"]
