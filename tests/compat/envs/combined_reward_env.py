"""An Atropos-style dataset env scored by a ``CombinedReward`` (as Atropos's dataset_env does).

A class-based reward is registered with ``@registry.register`` and combined with a built-in by
name; the dataset is a local JSONL file (``--env.dataset_path``).
"""

import json
from typing import Optional

from pydantic import Field

from atroposlib.envs.base import APIServerConfig, BaseEnv, BaseEnvConfig, ScoredDataGroup
from atroposlib.envs.reward_fns import CombinedReward, RewardFunction, registry
from atroposlib.type_definitions import Item
from atroposlib.utils.tokenize_for_trainer import tokenize_for_trainer


@registry.register
class ContainsAnswerReward(RewardFunction):
    """1.0 when the reply contains the gold answer."""

    def compute(self, completions, answer=None, **kwargs):
        return [1.0 if str(answer) in self.get_content(c) else 0.0 for c in completions]


class DatasetEnvConfig(BaseEnvConfig):
    dataset_path: str = Field(default="", description="JSONL file of {question, answer}.")
    reward_functions: list = Field(
        default_factory=lambda: [{"type": "containsanswer", "weight": 1.0}, "r1_format"],
        description="Reward specs, combined.",
    )


class CombinedRewardEnv(BaseEnv):
    name = "combined_reward_compat"
    env_config_cls = DatasetEnvConfig

    @classmethod
    def config_init(cls) -> tuple[DatasetEnvConfig, list[APIServerConfig]]:
        return DatasetEnvConfig(
            group_size=4,
            use_wandb=False,
            total_steps=3,
            batch_size=8,
            max_token_length=512,
            steps_per_eval=0,
        ), [APIServerConfig(model_name="tiny", base_url="http://localhost:9001/v1", api_key="x")]

    async def setup(self):
        with open(self.config.dataset_path) as f:
            self.rows = [json.loads(line) for line in f if line.strip()]
        self.i = 0
        self.reward_fn = CombinedReward(rewards=self.config.reward_functions, normalization="sum")

    async def get_next_item(self) -> Item:
        row = self.rows[self.i % len(self.rows)]
        self.i += 1
        return row

    async def collect_trajectories(self, item) -> tuple[Optional[ScoredDataGroup], list[Item]]:
        chat = [{"role": "user", "content": item["question"]}]
        out = await self.server.chat_completion(messages=chat, n=self.config.group_size)
        replies = [{"role": "assistant", "content": c.message.content or ""} for c in out.choices]
        scores = self.reward_fn(replies, answer=item["answer"])
        scored = ScoredDataGroup()
        scored["tokens"], scored["masks"], scored["scores"], scored["messages"] = [], [], [], []
        for reply, score in zip(replies, scores, strict=True):
            tok = tokenize_for_trainer(self.tokenizer, chat + [reply])
            scored["tokens"].append(tok["tokens"])
            scored["masks"].append(tok["masks"])
            scored["scores"].append(score)
            scored["messages"].append(chat + [reply])
        return scored, []


if __name__ == "__main__":
    CombinedRewardEnv.cli()
