"""Atropos import path of ``CombinedReward``: re-exports ``atroposlib.rewards.combined_reward``."""

from atroposlib.rewards.combined_reward import CombinedReward

__all__ = ["CombinedReward"]
