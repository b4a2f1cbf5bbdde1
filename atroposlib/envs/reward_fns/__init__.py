"""Atropos import path of the reward functions: ``atroposlib.envs.reward_fns`` re-exports ``atroposlib.rewards``.

Nothing here but re-exports (every name ``atroposlib.rewards`` exports); new code imports
``atroposlib.rewards``.
"""

from atroposlib.rewards import *  # noqa: F403
from atroposlib.rewards import __all__ as __all__
