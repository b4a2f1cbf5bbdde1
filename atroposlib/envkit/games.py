"""Gymnasium's Blackjack and Taxi as text games for multi-turn play.

A game renders its state as text, takes the model's move from an ``<action>name</action>`` tag (after
any thinking block) and returns the next observation and the Gymnasium reward. An unreadable or unknown
action ends the episode with a reason; the environment decides the penalty.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Optional

import gymnasium

from atroposlib.envkit.math_scoring import strip_thinking

_ACTION = re.compile(r"<action>\s*(.*?)\s*</action>", re.DOTALL | re.IGNORECASE)


@dataclass
class Step:
    observation: str
    reward: float
    done: bool
    invalid_reason: Optional[str] = None


def parse_action(response: str, actions: dict[str, int]) -> tuple[Optional[int], Optional[str]]:
    """(action id, None) or (None, reason) for the last ``<action>`` tag after the thinking block."""
    found = _ACTION.findall(strip_thinking(response))
    if not found:
        return None, "no <action>...</action> tag"
    name = found[-1].strip().lower()
    if name not in actions:
        return None, f"unknown action {name!r}; choose one of {', '.join(actions)}"
    return actions[name], None


class TextGame:
    """Base: subclasses set ``env_id``, ``actions``, ``rules`` and implement ``describe``."""

    env_id: str = ""
    actions: dict[str, int] = {}
    rules: str = ""

    def __init__(self, **make_kwargs) -> None:
        self.env = gymnasium.make(self.env_id, **make_kwargs)
        self.state = None

    def describe(self, state) -> str:
        raise NotImplementedError

    def reset(self, seed: int) -> str:
        self.state, _ = self.env.reset(seed=seed)
        return self.describe(self.state)

    def step(self, response: str) -> Step:
        action, reason = parse_action(response, self.actions)
        if action is None:
            return Step(f"Invalid move: {reason}. The game is over.", 0.0, True, reason)
        self.state, reward, terminated, truncated, _ = self.env.step(action)
        done = bool(terminated or truncated)
        return Step(
            self.describe(self.state) if not done else self.final_text(float(reward)),
            float(reward),
            done,
        )

    def final_text(self, reward: float) -> str:
        return f"The game is over (last reward {reward:g})."

    def close(self) -> None:
        self.env.close()


class BlackjackText(TextGame):
    """Blackjack-v1: beat the dealer without going over 21. Episode reward +1 win, 0 draw, -1 loss."""

    env_id = "Blackjack-v1"
    actions = {"stick": 0, "hit": 1}
    rules = (
        "You are playing Blackjack against a dealer. Get a hand total closer to 21 than the dealer "
        "without going over. Each turn reply with <action>hit</action> to take a card or "
        "<action>stick</action> to stop."
    )

    def describe(self, state) -> str:
        player, dealer, usable_ace = state
        ace = "with a usable ace" if usable_ace else "without a usable ace"
        return f"Your hand totals {player} ({ace}). The dealer shows {dealer}. Hit or stick?"

    def final_text(self, reward: float) -> str:
        outcome = "You win" if reward > 0 else "Draw" if reward == 0 else "You lose"
        return f"{outcome} (reward {reward:g}). The game is over."


class TaxiText(TextGame):
    """Taxi (5x5 grid): pick the passenger up and drop them at the destination. -1 per move,
    +20 for a correct drop-off, -10 for an illegal pickup/drop-off."""

    env_id = "Taxi-v4" if "Taxi-v4" in gymnasium.registry else "Taxi-v3"
    actions = {"south": 0, "north": 1, "east": 2, "west": 3, "pickup": 4, "dropoff": 5}
    rules = (
        "You drive a taxi on a 5x5 grid (row 0 is the top). Walls '|' block east/west moves. "
        "Pick up the passenger and drop them off at the destination. Each turn reply with one of "
        "<action>north</action>, south, east, west, pickup or dropoff inside <action></action>."
    )
    _places = ("R", "G", "Y", "B")

    def describe(self, state) -> str:
        row, col, passenger, destination = self.env.unwrapped.decode(state)
        grid = [[ch.decode() for ch in line] for line in self.env.unwrapped.desc]
        grid[row + 1][2 * col + 1] = "T"
        where = "in the taxi" if passenger == 4 else f"waiting at {self._places[passenger]}"
        return (
            "\n".join("".join(line) for line in grid)
            + f"\nThe taxi (T) is at row {row}, column {col}. The passenger is {where}; "
            f"the destination is {self._places[destination]}. What is your move?"
        )


GAMES = {"blackjack": BlackjackText, "taxi": TaxiText}
