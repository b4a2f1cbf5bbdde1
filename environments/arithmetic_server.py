"""Single-digit addition: the short-answer task of the end-to-end CPU demo.

Each item is a problem ``a+b=`` with a, b in 0..``max_operand``; the policy completes it (raw completion,
no chat template, a few tokens) and scores 1.0 when the completion is exactly the sum, else 0.0.
Rollouts go through ``managed_server`` so every group carries the exact token ids, the masks (prompt
masked out) and the inference logprobs the trainer's importance ratio needs.

Run it against the trajectory API and an inference server (the demo does this for you)::

    python environments/arithmetic_server.py serve --env.tokenizer_name MODEL_DIR \\
        --env.rollout_server_url http://127.0.0.1:8000 --openai.base_url http://127.0.0.1:9001/v1 \\
        --openai.server_type vllm --openai.model_name policy
"""

from __future__ import annotations

import random
from functools import partial
from typing import Optional

from pydantic import Field

from atroposlib.envs.base import APIServerConfig, BaseEnv, BaseEnvConfig, ScoredDataGroup
from atroposlib.type_definitions import Item
from atroposlib.utils.arithmetic_task import Problem, make_problem, score_completion


class ArithmeticEnvConfig(BaseEnvConfig):
    max_operand: int = Field(9, ge=1, le=99, description="Largest operand (0..max_operand).")
    seed: int = Field(0, description="Seed of the problem sampler.")
    max_completion_tokens: int = Field(4, ge=1, description="Completion budget in tokens.")
    temperature: float = Field(
        1.0, gt=0, description="Sampling temperature (1.0 = the policy itself)."
    )


class ArithmeticEnv(BaseEnv):
    name = "arithmetic"
    env_config_cls = ArithmeticEnvConfig

    @classmethod
    def config_init(cls) -> tuple[ArithmeticEnvConfig, list[APIServerConfig]]:
        env = ArithmeticEnvConfig(
            group_size=8,
            max_token_length=64,
            batch_size=128,
            max_batches_offpolicy=1,
            ensure_scores_are_not_same=False,
            include_messages=True,
            use_wandb=False,
            steps_per_eval=0,
            total_steps=300,
            wandb_name="arithmetic",
        )
        servers = [
            APIServerConfig(
                model_name="policy",
                base_url="http://127.0.0.1:9001/v1",
                api_key="x",
                server_type="vllm",
            )
        ]
        return env, servers

    async def setup(self) -> None:
        self.rng = random.Random(self.config.seed)

    async def get_next_item(self) -> Item:
        return make_problem(self.rng, self.config.max_operand)

    async def collect_trajectories(
        self, item: Problem
    ) -> tuple[Optional[ScoredDataGroup], list[Item]]:
        async with self.server.managed_server(tokenizer=self.tokenizer) as managed:
            await managed.completion(
                prompt=item.prompt,
                n=self.config.group_size,
                max_tokens=self.config.max_completion_tokens,
                temperature=self.config.temperature,
            )
            nodes = managed.get_state()["nodes"]
        group = self.group_builder(
            generation_params={
                "temperature": self.config.temperature,
                "max_tokens": self.config.max_completion_tokens,
            }
        )
        texts = [
            self.tokenizer.decode(n.tokens[n.metadata["prompt_length"] :], skip_special_tokens=True)
            for n in nodes
        ]
        scores = await self.score_samples(partial(score_completion, problem=item), texts)
        for node, text, score in zip(nodes, texts, scores, strict=True):
            if score is not None:
                self.add_metric("train/percent_correct", score)
            group.add(
                node.tokens,
                node.masked_tokens,
                score,
                inference_logprobs=node.logprobs,
                overlong=node.overlong,
                messages=[
                    {"role": "user", "content": item.prompt},
                    {"role": "assistant", "content": text},
                ],
            )
        return group.build(), []


if __name__ == "__main__":
    ArithmeticEnv.cli()
