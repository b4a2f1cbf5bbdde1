"""A multi-turn OpenEnv environment served with openenv's own server code (runs in openenv's venv).

    python openenv_count_server.py PORT MAX_SESSIONS

"Count": ``reset(seed)`` opens an episode whose prompt names the seed; every step's action
``message`` earns ``(len(message) % 5) / 4``; the observation after a step is feedback naming the
turn and the reply's length; the episode is done after ``TURNS`` steps. The tests recompute the
rewards from the replies they find in the groups.
"""

from __future__ import annotations

import sys
from typing import Any, Optional

import uvicorn
from openenv.core.env_server.http_server import create_app
from openenv.core.env_server.interfaces import Environment
from openenv.core.env_server.types import Action, Observation, State
from pydantic import Field

TURNS = 3


class CountAction(Action):
    message: str = Field(..., description="The model's reply.")


class CountObservation(Observation):
    prompt: str = Field(default="", description="What the model reads.")
    turn: int = Field(default=0, description="Steps taken so far.")


class CountEnvironment(Environment):
    SUPPORTS_CONCURRENT_SESSIONS: bool = True

    def __init__(self) -> None:
        self._state = State(step_count=0)
        self._seed = 0

    def reset(
        self, seed: Optional[int] = None, episode_id: Optional[str] = None, **kwargs: Any
    ) -> CountObservation:
        self._seed = seed or 0
        self._state = State(episode_id=episode_id or f"ep-{self._seed}", step_count=0)
        return CountObservation(
            prompt=f"Episode seed {self._seed}. Say something; I count its characters.",
            turn=0,
            done=False,
            reward=None,
        )

    def step(self, action: CountAction) -> CountObservation:  # type: ignore[override]
        self._state.step_count += 1
        n = len(action.message)
        return CountObservation(
            prompt=f"Turn {self._state.step_count}: you wrote {n} characters. Again.",
            turn=self._state.step_count,
            done=self._state.step_count >= TURNS,
            reward=(n % 5) / 4,
            metadata={"length": n},
        )

    @property
    def state(self) -> State:
        return self._state


if __name__ == "__main__":
    port, sessions = int(sys.argv[1]), int(sys.argv[2])
    app = create_app(
        CountEnvironment,
        CountAction,
        CountObservation,
        env_name="count",
        max_concurrent_envs=sessions,
    )
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning")
