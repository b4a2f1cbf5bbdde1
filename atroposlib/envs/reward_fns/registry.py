"""Atropos import path of the reward registry: re-exports ``atroposlib.rewards.registry``."""

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

__all__ = [
    "RewardFn",
    "RewardRegistry",
    "registry",
    "call_reward_fn",
    "combine",
    "get_reward_fn",
    "register",
    "registered_names",
]
