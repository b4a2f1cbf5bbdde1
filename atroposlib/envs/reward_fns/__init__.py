"""Atropos import path of the reward functions: ``atroposlib.envs.reward_fns`` re-exports ``atroposlib.rewards``.

Nothing here but re-exports; new code imports ``atroposlib.rewards``.
"""

from atroposlib.rewards import (
    CombinedReward,
    FunctionReward,
    RewardFn,
    RewardFunction,
    RewardRegistry,
    call_reward_fn,
    combine,
    format_reward,
    get_reward_fn,
    length_penalty,
    math_accuracy,
    r1_format,
    register,
    registered_names,
    registry,
    repetition_penalty,
)

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
