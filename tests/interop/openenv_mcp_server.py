"""An OpenEnv environment with one MCP tool, served with openenv's own server code (openenv's venv).

    python openenv_mcp_server.py PORT MAX_SESSIONS

"Vault": ``reset(seed)`` asks for the code of key ``k<seed>``; the MCP tool ``lookup(key)`` (FastMCP,
through openenv's ``MCPEnvironment``) returns ``code-<key>`` and fails for a key that is not ``k<n>``;
the step action ``message`` is the answer: reward 1.0 when it is the code, else 0.0, and done.
"""

from __future__ import annotations

import sys
from typing import Any, Optional

import uvicorn
from fastmcp import FastMCP
from openenv.core.env_server.http_server import create_app
from openenv.core.env_server.mcp_environment import MCPEnvironment
from openenv.core.env_server.types import Action, Observation, State
from pydantic import Field


class AnswerAction(Action):
    message: str = Field(..., description="The model's answer.")


class VaultObservation(Observation):
    prompt: str = Field(default="", description="What the model reads.")


class VaultEnvironment(MCPEnvironment):
    SUPPORTS_CONCURRENT_SESSIONS: bool = True

    def __init__(self) -> None:
        mcp = FastMCP("vault")

        @mcp.tool
        def lookup(key: str) -> str:
            """The code stored under a key (keys look like k1, k2, ...)."""
            if not key.startswith("k") or not key[1:].isdigit():
                raise ValueError(f"no such key: {key}")
            return f"code-{key}"

        super().__init__(mcp)
        self._state = State(step_count=0)
        self._seed = 0

    def reset(
        self, seed: Optional[int] = None, episode_id: Optional[str] = None, **kwargs: Any
    ) -> VaultObservation:
        self._seed = seed or 0
        self._state = State(episode_id=episode_id or f"ep-{self._seed}", step_count=0)
        return VaultObservation(
            prompt=f"Seed {self._seed}: what is the code of key k{self._seed}? Use the tools.",
            done=False,
            reward=None,
        )

    def _step_impl(self, action: Action, timeout_s: Optional[float] = None, **kwargs: Any) -> Any:
        self._state.step_count += 1
        message = getattr(action, "message", "")
        right = message.strip() == f"code-k{self._seed}"
        return VaultObservation(prompt="thanks", done=True, reward=1.0 if right else 0.0)

    @property
    def state(self) -> State:
        return self._state


if __name__ == "__main__":
    port, sessions = int(sys.argv[1]), int(sys.argv[2])
    app = create_app(
        VaultEnvironment,
        AnswerAction,
        VaultObservation,
        env_name="vault",
        max_concurrent_envs=sessions,
    )
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning")
