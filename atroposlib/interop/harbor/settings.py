"""The ``--harbor.*`` settings of the Harbor env and its config class (``--env.*`` plus the section)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from atroposlib.runtime.config import BaseEnvConfig


class HarborSettings(BaseModel):
    """Which Harbor tasks to play, in which sandbox, under which limits (``--harbor.<field>``).

    A limit the task's ``task.toml`` sets wins over the flag (``[agent].timeout_sec`` for the wall
    time, ``[metadata.limits]`` for the rest)."""

    model_config = ConfigDict(validate_assignment=True)

    tasks: str = Field(
        default="",
        description="The training tasks: one Harbor task folder or a folder of them (required).",
    )
    eval_tasks: str = Field(
        default="",
        description="The tasks `evaluate` plays (once each, greedily); none: --harbor.tasks.",
    )
    sandbox: Literal["host", "podman"] = Field(
        default="host",
        description="host: bubblewrap on this machine's read-only system (no container runtime; "
        "the Dockerfile is replayed as far as it can be); podman: Harbor's own runtime and its "
        "podman backend, building the task's Dockerfile (scripts/setup_harbor.sh).",
    )
    trials_dir: str = Field(
        default="",
        description="Where each episode's trial folder is made (and removed); none: a temp folder.",
    )
    max_turns: int = Field(default=4, ge=1, description="Model turns of one episode.")
    max_tokens_per_turn: int = Field(
        default=128, ge=1, description="Most tokens of one model reply."
    )
    command_timeout_s: float = Field(
        default=10.0,
        gt=0,
        description="Time limit of one command; past it the command and its "
        "processes are killed and the model is told.",
    )
    max_output_bytes: int = Field(
        default=2048, ge=1, description="Bytes of one command's output the model is shown."
    )
    episode_timeout_s: float = Field(
        default=300.0, gt=0, description="Wall time of the agent's part of an episode."
    )
    temperature: float = Field(default=1.0, ge=0.0, description="Sampling temperature.")
    eval_temperature: float = Field(
        default=0.0, ge=0.0, description="Sampling temperature of evaluation episodes."
    )


class HarborEnvConfig(BaseEnvConfig):
    """``BaseEnvConfig`` plus the ``harbor`` section."""

    harbor: HarborSettings = Field(
        default_factory=HarborSettings, description="The Harbor tasks and how to play them."
    )


__all__ = ["HarborEnvConfig", "HarborSettings"]
