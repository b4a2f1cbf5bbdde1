"""Small composable reward functions, a registry and weighted combination.

from atroposlib.envs.reward_fns import combine
reward = combine({"math_accuracy": 1.0, "r1_format": 0.2, "length_penalty": 0.1})
scores = reward(texts, answers=[gold] * len(texts), max_length=1024)
"""

from atroposlib.envs.reward_fns import builtin  # noqa: F401  (registers the built-ins)
from atroposlib.envs.reward_fns.builtin import (
    format_reward,
    length_penalty,
    math_accuracy,
    r1_format,
    repetition_penalty,
)
from atroposlib.envs.reward_fns.combined_reward import CombinedReward
from atroposlib.envs.reward_fns.registry import (
    RewardFn,
    RewardRegistry,
    call_reward_fn,
    combine,
    get_reward_fn,
    register,
    registered_names,
    registry,
)
from atroposlib.envs.reward_fns.reward_function import FunctionReward, RewardFunction

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
