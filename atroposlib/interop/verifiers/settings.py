"""The ``--verifiers.*`` settings of the verifiers env and its config class (``--env.*`` plus the section)."""

from __future__ import annotations

from typing import Any, Optional

from pydantic import BaseModel, ConfigDict, Field

from atroposlib.runtime.config import BaseEnvConfig


class VerifiersSettings(BaseModel):
    """Which verifiers v1 taskset to train on and how to play it (flags ``--verifiers.<field>``)."""

    model_config = ConfigDict(validate_assignment=True)

    env: str = Field(
        default="",
        description="The taskset: an installed taskset id (as `vf-eval NAME` takes it) or an "
        "importable module exporting its Taskset subclass in __all__ (required).",
    )
    args: dict[str, Any] = Field(
        default_factory=dict,
        description='The taskset\'s config fields (JSON), e.g. {"n": 100}, as vf-eval takes them.',
    )
    max_tokens_per_turn: int = Field(
        default=256, ge=1, description="Most tokens of one model reply (one turn)."
    )
    max_turns: int = Field(
        default=8,
        ge=1,
        description="Model turns after which an exchange ends (the seat's own max_turns, when "
        "its env sets one, also applies).",
    )
    temperature: float = Field(default=1.0, ge=0.0, description="Sampling temperature.")
    eval_args: Optional[dict[str, Any]] = Field(
        default=None,
        description="Taskset config fields (JSON) of the `evaluate` tasks; none: --verifiers.args.",
    )
    eval_tasks: int = Field(default=8, ge=1, description="Tasks `evaluate` plays (the first N).")
    eval_temperature: float = Field(
        default=0.0, ge=0.0, description="Sampling temperature of evaluation episodes."
    )


class VerifiersEnvConfig(BaseEnvConfig):
    """``BaseEnvConfig`` plus the ``verifiers`` section."""

    verifiers: VerifiersSettings = Field(
        default_factory=VerifiersSettings, description="The verifiers taskset and how to play it."
    )


__all__ = ["VerifiersEnvConfig", "VerifiersSettings"]
