"""A minimal Atropos-style environment used by the env-runtime tests (addition questions).

Written exactly as an Atropos env file would be: only the imports name atroposlib.
"""

import random
from typing import Optional

from atroposlib.envs.base import APIServerConfig, BaseEnv, BaseEnvConfig, ScoredDataGroup
from atroposlib.type_definitions import Item


class AdditionEnv(BaseEnv):
    name = "addition_test"

    @classmethod
    def config_init(cls) -> tuple[BaseEnvConfig, list[APIServerConfig]]:
        env_config = BaseEnvConfig(
            group_size=4,
            use_wandb=False,
            total_steps=3,
            batch_size=8,
            max_token_length=256,
            steps_per_eval=0,
            max_num_workers=2,
        )
        return env_config, [
            APIServerConfig(
                model_name="tiny",
                base_url="http://localhost:9001/v1",
                api_key="x",
                server_type="vllm",
            )
        ]

    async def setup(self):
        self.rng = random.Random(0)
        self.eval_metrics = []

    async def get_next_item(self) -> Item:
        a, b = self.rng.randint(0, 9), self.rng.randint(0, 9)
        return {"question": f"What is {a}+{b}?", "answer": str(a + b)}

    async def collect_trajectories(self, item) -> tuple[Optional[ScoredDataGroup], list[Item]]:
        messages = [{"role": "user", "content": item["question"]}]
        async with self.server.managed_server(tokenizer=self.tokenizer) as managed:
            completion = await managed.chat_completion(
                messages=messages, n=self.config.group_size, max_tokens=32, temperature=1.0
            )
            nodes = managed.get_state()["nodes"]
        scores = ScoredDataGroup()
        scores["tokens"], scores["masks"], scores["scores"] = [], [], []
        scores["inference_logprobs"], scores["messages"] = [], []
        for choice, node in zip(completion.choices, nodes, strict=True):
            text = choice.message.content or ""
            scores["tokens"].append(node.tokens)
            scores["masks"].append(node.masked_tokens)
            scores["inference_logprobs"].append(node.logprobs)
            scores["scores"].append(1.0 if item["answer"] in text else 0.0)
            scores["messages"].append(messages + [{"role": "assistant", "content": text}])
        return scores, []

    async def evaluate(self, *args, **kwargs):
        correct = 0
        for _ in range(3):
            item = await self.get_next_item()
            out = await self.server.chat_completion(
                messages=[{"role": "user", "content": item["question"]}],
                n=1,
                max_tokens=16,
                split="eval",
            )
            correct += int(item["answer"] in (out.choices[0].message.content or ""))
        self.eval_metrics.append(("eval/percent_correct", correct / 3))


if __name__ == "__main__":
    AdditionEnv.cli()
