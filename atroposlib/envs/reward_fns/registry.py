"""Atropos import path of the reward registry: re-exports ``atroposlib.rewards.registry``'s names."""

from atroposlib.rewards.registry import *  # noqa: F403
from atroposlib.rewards.registry import __all__ as __all__
