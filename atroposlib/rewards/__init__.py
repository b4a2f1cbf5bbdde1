"""Reward functions: small composable scorers, a registry by name and weighted combination.

``reward_function`` (what a reward function is: plain functions, ``RewardFunction`` classes),
``registry`` (names -> functions, ``combine``), ``builtin`` (the registered built-ins),
``combined_reward`` (Atropos's ``CombinedReward``). Imports go in that order, never back.

    from atroposlib.rewards import combine
    reward = combine({"math_accuracy": 1.0, "r1_format": 0.2, "length_penalty": 0.1})
    scores = reward(texts, answers=[gold] * len(texts), max_length=1024)
"""

from atroposlib.rewards import builtin  # noqa: F401  (registers the built-ins)
from atroposlib.rewards.builtin import (
    format_reward,
    length_penalty,
    math_accuracy,
    r1_format,
    repetition_penalty,
)
from atroposlib.rewards.combined_reward import CombinedReward
from atroposlib.rewards.registry import (
    RewardFn,
    RewardRegistry,
    call_reward_fn,
    combine,
    get_reward_fn,
    register,
    registered_names,
    registry,
)
from atroposlib.rewards.reward_function import FunctionReward, RewardFunction

__all__ = [
    "CombinedReward",
    "FunctionReward",
    "RewardFunction",
    "RewardFn",
    "RewardRegistry",
    "registry",
    "call_reward_fn",
    "combine",
    "format_reward",
    "get_reward_fn",
    "length_penalty",
    "math_accuracy",
    "r1_format",
    "register",
    "registered_names",
    "repetition_penalty",
]
