"""An Atropos-style env that makes the same two groups every run, with no inference server.

It runs unchanged under this library and under PyPI's atroposlib 0.4.0, so the ``process`` lines
both write for the same groups can be compared key by key
(``tests/compat/make_atropos040_process_fixture.py`` records Atropos's lines). Odd items go through
Atropos's default ``collect_trajectories`` (one ``collect_trajectory`` per sequence, combined by the
library); even items are a ``ScoredDataGroup`` the env builds itself, with the empty
``advantages`` / ``images`` / ``overrides`` lists Atropos's own env files leave in.
"""

from atroposlib.envs.base import APIServerConfig, BaseEnv, BaseEnvConfig, ScoredDataGroup


class FixedGroupsEnv(BaseEnv):
    name = "fixed_groups"

    @classmethod
    def config_init(cls):
        return BaseEnvConfig(
            group_size=2,
            use_wandb=False,
            total_steps=2,
            batch_size=4,
            max_token_length=512,
            steps_per_eval=0,
            ensure_scores_are_not_same=False,
        ), [
            APIServerConfig(
                model_name="unused",
                base_url="http://127.0.0.1:9/v1",
                api_key="x",
                server_type="openai",
            )
        ]

    async def setup(self):
        self.item = 0
        self.sequence = 0

    async def get_next_item(self):
        self.item += 1
        return self.item

    async def collect_trajectory(self, item):
        self.sequence += 1
        s = self.sequence
        scored = {
            "tokens": [11, 12, 13, 20 + s],
            "masks": [-100, -100, 13, 20 + s],
            "scores": 1.0 if s % 2 else 0.0,
            "messages": [
                {"role": "user", "content": f"item {item}"},
                {"role": "assistant", "content": f"answer {s}"},
            ],
        }
        return scored, []

    async def collect_trajectories(self, item):
        if item % 2:
            return await super().collect_trajectories(item)
        group = ScoredDataGroup()
        group["tokens"] = [[11, 12, 30, 31], [11, 12, 32]]
        group["masks"] = [[-100, -100, 30, 31], [-100, -100, 32]]
        group["scores"] = [1.0, -1.0]
        group["advantages"] = []
        group["overrides"] = []
        group["images"] = []
        group["inference_logprobs"] = [[1.0, 1.0, -0.5, -0.25], [1.0, 1.0, -2.0]]
        group["messages"] = [
            [{"role": "user", "content": "two"}, {"role": "assistant", "content": "a b"}],
            [{"role": "user", "content": "two"}, {"role": "assistant", "content": "c"}],
        ]
        return group, []

    async def evaluate(self, *args, **kwargs):
        return None


if __name__ == "__main__":
    FixedGroupsEnv.cli()
