"""Typed shapes of agent and game histories (Atropos's ``GameHistory`` and friends).

Plain ``TypedDict`` s for env code to annotate multi-turn episodes; nothing validates them and they
never cross the wire. Re-exported by ``atroposlib.type_definitions``; this module imports nothing
from the package.
"""

from __future__ import annotations

from typing import Any, Literal, Optional, TypedDict, Union

Content = Union[str, list[dict[str, Any]]]


class HistoryMessage(TypedDict, total=False):
    role: Literal["system", "user", "assistant", "tool"]
    content: Content
    reward: Optional[float]


class AgentStep(TypedDict, total=False):
    """One step of one agent: its number, the messages exchanged and the reward."""

    step: int
    messages: list[HistoryMessage]
    reward: float


AgentHistory = dict[str, list[AgentStep]]
"""Agent id (e.g. ``"Player 1"``) to that agent's steps."""


class Observation(TypedDict):
    """An observation: the raw data and its rendering for the model."""

    raw: dict[str, Any]
    rendered: Content


class GameStep(TypedDict):
    """One (state, action, reward) step of a game with its metadata."""

    step: int
    agent_id: str
    observation: Observation
    action: str
    reward: Union[float, dict[str, float]]
    done: bool
    info: dict[str, Any]


GameHistory = list[GameStep]
"""A game episode: its steps in order."""

__all__ = [
    "AgentHistory",
    "AgentStep",
    "Content",
    "GameHistory",
    "GameStep",
    "HistoryMessage",
    "Observation",
]
