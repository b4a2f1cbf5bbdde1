"""The ``--openenv.*`` settings of the OpenEnv env and its config class (``--env.*`` plus the section)."""

from __future__ import annotations

from typing import Any, Literal, Optional

from pydantic import BaseModel, ConfigDict, Field

from atroposlib.runtime.config import BaseEnvConfig


class OpenEnvSettings(BaseModel):
    """How to drive one OpenEnv server (flags ``--openenv.<field>``)."""

    model_config = ConfigDict(validate_assignment=True)

    url: str = Field(
        default="",
        description="The OpenEnv server: http://host:port, ws://host:port or its .../ws endpoint "
        "(required).",
    )
    action_field: str = Field(
        default="message",
        min_length=1,
        description="Field of the env's action that carries the model's reply.",
    )
    action_extra: dict[str, Any] = Field(
        default_factory=dict,
        description='Other action fields sent with every step (JSON), e.g. {"tool_name": "x"}.',
    )
    observation_field: Optional[str] = Field(
        default=None,
        description="Observation field shown to the model; none: the first of prompt, message, "
        "text, content, ... or the last of messages, else the observation as JSON.",
    )
    system_prompt: Optional[str] = Field(
        default=None, description="System message before the first observation."
    )
    max_tokens_per_turn: int = Field(
        default=256, ge=1, description="Most tokens of one model reply (one step)."
    )
    max_turns: int = Field(
        default=8,
        ge=1,
        description="Model replies (steps and tool-call turns) after which an episode that is not "
        "done is cut.",
    )
    tools: bool = Field(
        default=True,
        description="Offer the server's MCP tools (tools/list at reset) to the model and run its "
        "<tool_call>s on the server (tools/call); false: never ask.",
    )
    temperature: float = Field(default=1.0, ge=0.0, description="Sampling temperature.")
    seed: int = Field(
        default=0, ge=0, description="Reset seed of the first item; item i resets with seed + i."
    )
    reset_args: dict[str, Any] = Field(
        default_factory=dict, description="Other reset fields (JSON), sent with the seed."
    )
    reward: Literal["sum", "last"] = Field(
        default="sum", description="Episode score: the sum of the step rewards, or the last one."
    )
    max_sessions: int = Field(
        default=1,
        ge=1,
        description="Episodes open on the server at once (its max_concurrent_envs; openenv's "
        "default is 1).",
    )
    connect_timeout: float = Field(
        default=10.0, gt=0, description="Seconds to open a session before it counts as dropped."
    )
    message_timeout: float = Field(
        default=60.0, gt=0, description="Seconds to wait for an answer to reset or step."
    )
    eval_episodes: int = Field(default=8, ge=1, description="Episodes `evaluate` runs.")
    eval_seed: int = Field(
        default=1_000_000, ge=0, description="Reset seed of the first evaluation episode."
    )
    eval_temperature: float = Field(
        default=0.0, ge=0.0, description="Sampling temperature of evaluation episodes."
    )


class OpenEnvEnvConfig(BaseEnvConfig):
    """``BaseEnvConfig`` plus the ``openenv`` section."""

    openenv: OpenEnvSettings = Field(
        default_factory=OpenEnvSettings, description="The OpenEnv server and how to drive it."
    )


__all__ = ["OpenEnvEnvConfig", "OpenEnvSettings"]
