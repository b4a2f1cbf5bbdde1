"""Chat arithmetic: a pretrained chat model is asked ``What is a + b?`` and graded on its free-text reply.

The task of the pretrained-model demo (``atropos-demo --model smollm2 --inference vllm``). Unlike
``arithmetic_server.py`` (raw completions for a model built from scratch), the prompt goes through the
model's own chat template (``managed_server.chat_completion``), no answer format is imposed, and the
reward is read out of free text: 1.0 when the last integer in the reply is the sum, else 0.0
(``atroposlib.utils.chat_arithmetic_task``). A reply that rambles past ``--env.max_completion_tokens``
before stating the sum scores 0, so the policy can gain by answering correctly and briefly.

Operand pairs in ``min_operand..max_operand`` are split by ``--env.seed`` into training pairs and
``--env.held_out`` held-out pairs; ``evaluate`` reports greedy accuracy on the held-out ones.

    python environments/chat_arithmetic_server.py serve --env.tokenizer_name MODEL_DIR \\
        --env.rollout_server_url http://127.0.0.1:8000 --openai.base_url http://127.0.0.1:9001/v1 \\
        --openai.server_type vllm --openai.model_name policy
"""

from __future__ import annotations

import random
import time
from functools import partial
from typing import Any

from pydantic import Field, model_validator

from atroposlib.envkit.chat import transcript
from atroposlib.envkit.evaluation import evaluate_items, report_eval
from atroposlib.envkit.rollouts import SamplingConfig, Trajectories
from atroposlib.envs.base import APIServerConfig, BaseEnv
from atroposlib.type_definitions import Item
from atroposlib.utils.chat_arithmetic_task import ChatProblem, score_reply, split_problems


class ChatArithmeticConfig(SamplingConfig):
    min_operand: int = Field(1, ge=0, description="Smallest operand.")
    max_operand: int = Field(9, ge=0, le=999, description="Largest operand.")
    held_out: int = Field(
        20, ge=0, description="Operand pairs kept out of training for evaluate()."
    )
    seed: int = Field(0, description="Seed of the train/held-out split and of the item order.")
    max_completion_tokens: int = Field(
        16, ge=1, description="Reply budget in tokens: the sum must be stated within it."
    )
    temperature: float = Field(0.7, ge=0.0, description="Sampling temperature.")

    @model_validator(mode="after")
    def _operands(self) -> ChatArithmeticConfig:
        if self.max_operand < self.min_operand:
            raise ValueError(
                f"max_operand ({self.max_operand}) is below min_operand ({self.min_operand})"
            )
        return self


class ChatArithmeticEnv(BaseEnv):
    name = "chat_arithmetic"
    env_config_cls = ChatArithmeticConfig

    @classmethod
    def config_init(cls) -> tuple[ChatArithmeticConfig, list[APIServerConfig]]:
        env = ChatArithmeticConfig(
            group_size=8,
            max_token_length=128,
            batch_size=32,
            max_batches_offpolicy=1,
            ensure_scores_are_not_same=False,
            include_messages=True,
            use_wandb=False,
            steps_per_eval=0,
            total_steps=60,
            wandb_name="chat_arithmetic",
        )
        server = APIServerConfig(
            model_name="policy",
            base_url="http://127.0.0.1:9001/v1",
            api_key="x",
            server_type="vllm",
        )
        return env, [server]

    async def setup(self) -> None:
        cfg = self.config
        try:
            self.train, self.test = split_problems(
                cfg.min_operand, cfg.max_operand, cfg.held_out, cfg.seed
            )
        except ValueError as exc:
            from atroposlib.errors import ConfigError

            raise ConfigError(str(exc)) from None
        self.rng = random.Random(cfg.seed + 1)

    async def get_next_item(self) -> Item:
        return self.rng.choice(self.train)

    async def collect_trajectories(self, item: ChatProblem) -> Trajectories:
        messages = item.messages()
        async with self.server.managed_server(tokenizer=self.tokenizer) as managed:
            completion = await managed.chat_completion(
                messages=messages,
                n=self.config.group_size,
                temperature=self.config.temperature,
                max_tokens=self.config.max_completion_tokens,
            )
            nodes = managed.get_state()["nodes"]
        replies = [choice.message.content or "" for choice in completion.choices]
        group = self.group_builder(
            generation_params={
                "temperature": self.config.temperature,
                "max_tokens": self.config.max_completion_tokens,
            }
        )
        scores = await self.score_samples(partial(score_reply, problem=item), replies)
        for reply, node, score in zip(replies, nodes, scores, strict=True):
            if score is not None:
                self.add_metric("train/percent_correct", score)
            group.add_node(node, score, messages=transcript(messages, reply))
        return group.build(), []

    async def evaluate(self, *args: Any, **kwargs: Any) -> None:
        start = time.time()

        async def sample(problem: ChatProblem) -> dict[str, Any]:
            completion = await self.server.chat_completion(
                messages=problem.messages(),
                n=1,
                temperature=0.0,
                split="eval",
                max_tokens=self.config.max_completion_tokens,
            )
            reply = completion.choices[0].message.content or ""
            return {
                "question": problem.question,
                "gold_answer": problem.answer,
                "response": reply,
                "correct": bool(score_reply(reply, problem)),
            }

        samples = await evaluate_items(self, self.test, sample)
        accuracy = sum(s["correct"] for s in samples) / max(1, len(samples))
        await report_eval(
            self,
            {"eval/percent_correct": accuracy},
            task_name=self.name,
            samples=samples,
            start_time=start,
            end_time=time.time(),
            generation_parameters={"temperature": 0.0},
        )


if __name__ == "__main__":
    ChatArithmeticEnv.cli()
