"""A Harbor verifier's reward, read as Harbor reads it, and the one number an episode is scored with.

``test.sh`` writes ``/logs/verifier/reward.json`` (an object of named numbers) or ``reward.txt`` (one
number); when both are there, ``reward.json`` wins, as in Harbor's ``Verifier``. An empty file, text
that is not a number, a value that is not a finite number: each is a ``SandboxFailure`` of kind
``no_reward`` (the episode's reward is unavailable, never 0). The episode's score is the reward named
``reward`` (Harbor's name for a ``reward.txt``'s value), or the only one there is.

Standard library only (also used where Harbor's own Python runs).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from pathlib import Path

from atroposlib.errors import SandboxFailure

REWARD_TEXT = "reward.txt"
REWARD_JSON = "reward.json"


def _finite(value: object, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise SandboxFailure("no_reward", f"{where} holds {value!r}, not a finite number")
    return float(value)


def read_rewards(verifier_dir: Path) -> dict[str, float]:
    """The rewards the verifier wrote into ``verifier_dir`` (see the module docstring)."""
    as_json, as_text = verifier_dir / REWARD_JSON, verifier_dir / REWARD_TEXT
    if as_json.is_file():
        text = as_json.read_text(encoding="utf-8", errors="replace")
        if not text.strip():
            raise SandboxFailure("no_reward", f"the verifier's {REWARD_JSON} is empty")
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise SandboxFailure(
                "no_reward", f"the verifier's {REWARD_JSON} is not JSON ({exc.msg})"
            ) from None
        if not isinstance(data, dict) or not data:
            raise SandboxFailure(
                "no_reward", f"the verifier's {REWARD_JSON} is not an object of named rewards"
            )
        return {str(k): _finite(v, f"{REWARD_JSON}[{k!r}]") for k, v in data.items()}
    if as_text.is_file():
        text = as_text.read_text(encoding="utf-8", errors="replace").strip()
        if not text:
            raise SandboxFailure("no_reward", f"the verifier's {REWARD_TEXT} is empty")
        try:
            value = float(text)
        except ValueError:
            raise SandboxFailure(
                "no_reward", f"the verifier's {REWARD_TEXT} holds {text[:40]!r}, not a number"
            ) from None
        return {"reward": _finite(value, REWARD_TEXT)}
    raise SandboxFailure("no_reward", f"the verifier wrote neither {REWARD_TEXT} nor {REWARD_JSON}")


def episode_reward(rewards: Mapping[str, float]) -> float:
    """The score of an episode: ``rewards["reward"]``, or the only reward there is."""
    if "reward" in rewards:
        return float(rewards["reward"])
    if len(rewards) == 1:
        return float(next(iter(rewards.values())))
    raise SandboxFailure(
        "no_reward",
        f"the verifier wrote several rewards ({', '.join(sorted(rewards))}) and none named 'reward'",
    )


__all__ = ["REWARD_JSON", "REWARD_TEXT", "episode_reward", "read_rewards"]
