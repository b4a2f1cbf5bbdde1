"""An Atropos-style env file whose rollouts always fail in a hook, as when a library it uses rejects
its setting (gymnasium 1.x refusing ``Taxi-v3``): used to check that ``process`` and ``serve``
count and summarise the failures, back off, and exit non-zero instead of reporting success."""

from typing import Optional

from atroposlib.envs.base import ScoredDataGroup
from atroposlib.type_definitions import Item
from tests.envs.example_env import AdditionEnv


class BrokenEnv(AdditionEnv):
    name = "broken_test"

    async def collect_trajectories(self, item) -> tuple[Optional[ScoredDataGroup], list[Item]]:
        raise ValueError("Environment `Taxi-v3` doesn't exist.")

    async def evaluate(self, *args, **kwargs):
        raise ValueError("Environment `Taxi-v3` doesn't exist.")


if __name__ == "__main__":
    BrokenEnv.cli()
