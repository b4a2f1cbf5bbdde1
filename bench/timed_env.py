"""A real env process whose speed is set: each item takes ``--env.seconds_per_group`` seconds.

``bench/multi_env_shares.py`` runs two of them (one 10x slower) against a real ``run-api``. It is a
``BaseEnv`` served by the real runtime (registration, ``/status-env`` backpressure, spool, sender);
only generation is replaced by a sleep and a synthetic group (random tokens, distinct scores), so the
env's speed is exactly what the benchmark asks and no inference server is needed.

    python bench/timed_env.py serve --env.seconds_per_group 0.5 --env.rollout_server_url URL
"""

from __future__ import annotations

import asyncio
import random
from typing import Any

from pydantic import Field

from atroposlib.envs.base import APIServerConfig, BaseEnv, BaseEnvConfig
from atroposlib.testing import tiny_tokenizer_dir
from atroposlib.type_definitions import Item


class TimedEnvConfig(BaseEnvConfig):
    seconds_per_group: float = Field(0.5, gt=0, description="Time one item takes to generate.")


class TimedEnv(BaseEnv):
    name = "timed"
    env_config_cls = TimedEnvConfig

    @classmethod
    def config_init(cls) -> tuple[TimedEnvConfig, list[APIServerConfig]]:
        cfg = TimedEnvConfig(
            tokenizer_name=str(tiny_tokenizer_dir()),
            group_size=4,
            batch_size=16,
            max_token_length=64,
            max_num_workers=1,
            use_wandb=False,
            steps_per_eval=0,
            total_steps=-1,
            progress_interval=0,
        )
        # never asked: generation is a sleep (the URL only satisfies the config's checks)
        return cfg, [APIServerConfig(base_url="http://127.0.0.1:9/v1", model_name="none")]

    async def setup(self) -> None:
        self.rng = random.Random(self.config.seed if hasattr(self.config, "seed") else 0)
        self.n = 0

    async def get_next_item(self) -> Item:
        self.n += 1
        return {"n": self.n}

    async def collect_trajectories(self, item: Item) -> tuple[Any, list[Item]]:
        await asyncio.sleep(self.config.seconds_per_group)
        g = self.config.group_size
        tokens = [[self.rng.randint(1, 200) for _ in range(12)] for _ in range(g)]
        masks = [[-100] * 4 + t[4:] for t in tokens]
        return {"tokens": tokens, "masks": masks, "scores": [float(i) for i in range(g)]}, []


if __name__ == "__main__":
    TimedEnv.cli()
