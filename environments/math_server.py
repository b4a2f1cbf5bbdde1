"""Math with ``\\boxed{}`` answers, scored with math-verify (Atropos's ``math_server``).

Data: ``datasets.load_dataset("zwhe99/DeepMath-103K")`` (``question`` / ``final_answer``) when the hub is
reachable; offline (``--env.data_source procedural``, or ``auto`` without a hub) an even mix of
reasoning-gym's ``basic_arithmetic``, ``simple_equations``, ``fraction_simplification`` and ``chain_sum``,
whose gold answers math-verify can check. Any hub dataset works with ``--env.hub_path``,
``--env.question_field`` and ``--env.answer_field``.

Reward: +1 for an equivalent boxed answer, -1 otherwise, and Atropos's length penalty when a whole group
is right. A group whose gold answer math-verify cannot parse is skipped (never trained as 0).

    python environments/math_server.py process --env.tokenizer_name MODEL_DIR \\
        --openai.base_url http://127.0.0.1:9001/v1 --env.total_steps 2 --env.data_source procedural
"""

import time
from typing import Optional

from envkit.chat import chat, system_prompt
from envkit.data_sources import DataSource, load_math
from envkit.math_scoring import grade_math_group, verify_math
from envkit.rollouts import drain_metrics, greedy_answer, sample_group
from pydantic import Field

from atroposlib.envs.base import APIServerConfig, BaseEnv, BaseEnvConfig, ScoredDataGroup
from atroposlib.type_definitions import Item

ANSWER_FORMAT = "Solve the problem and put only your final answer in \\boxed{}."


class MathConfig(BaseEnvConfig):
    data_source: DataSource = Field(default="auto", description="auto (hub, else offline), hub or procedural.")
    hub_path: str = Field(default="zwhe99/DeepMath-103K", description="Hub dataset used when online.")
    question_field: str = Field(default="question", description="Hub column holding the problem.")
    answer_field: str = Field(default="final_answer", description="Hub column holding the final answer.")
    offline_size: int = Field(default=2000, ge=4, description="Procedural problems to generate per split.")
    eval_size: int = Field(default=64, ge=1, description="Problems used by evaluate().")
    temperature: float = Field(default=1.0, ge=0.0, description="Sampling temperature for training rollouts.")


class MathEnv(BaseEnv):
    name = "math"
    env_config_cls = MathConfig

    @classmethod
    def config_init(cls) -> tuple[MathConfig, list[APIServerConfig]]:
        env_config = MathConfig(
            tokenizer_name="NousResearch/DeepHermes-3-Llama-3-3B-Preview", group_size=8, total_steps=1000,
            batch_size=12, steps_per_eval=100, max_token_length=4096, wandb_name="math",
        )
        server = APIServerConfig(model_name="NousResearch/DeepHermes-3-Llama-3-3B-Preview",
                                 base_url="http://localhost:9001/v1", api_key="x", server_type="vllm")
        return env_config, [server]

    async def setup(self) -> None:
        cfg = self.config

        def load(split: str, size: int):
            return load_math(cfg.data_source, split, size=size, hub_path=cfg.hub_path,
                             question_field=cfg.question_field, answer_field=cfg.answer_field).rows

        self.train = load("train", cfg.offline_size)
        self.test = load("test", max(cfg.eval_size, 4))[: cfg.eval_size]
        self.system = system_prompt(ANSWER_FORMAT)
        self.iter = 0
        self.percent_correct_buffer: list[float] = []

    async def get_next_item(self) -> Item:
        row = self.train[self.iter % len(self.train)]
        self.iter += 1
        return row

    async def collect_trajectories(self, item: Item) -> tuple[Optional[ScoredDataGroup], list[Item]]:
        messages = chat(self.system, item["question"])
        answers, nodes = await sample_group(self, messages)
        graded = grade_math_group(answers, item["answer"], [len(n.tokens) for n in nodes],
                                  self.config.max_token_length)
        if graded is None:
            return None, []
        correct, scores = graded
        self.percent_correct_buffer.extend(1.0 if ok else 0.0 for ok in correct)
        group = self.group_builder()
        for answer, node, score in zip(answers, nodes, scores, strict=True):
            group.add_node(node, score, messages=messages + [{"role": "assistant", "content": answer}])
        return group.build(), []

    async def evaluate(self, *args, **kwargs) -> None:
        start, samples = time.time(), []
        for row in self.test:
            answer = await greedy_answer(self, chat(self.system, row["question"]))
            samples.append({"question": row["question"], "gold_answer": row["answer"], "response": answer,
                            "correct": bool(verify_math(answer, row["answer"]))})
        accuracy = sum(s["correct"] for s in samples) / max(1, len(samples))
        self.eval_metrics.append(("eval/percent_correct", accuracy))
        await self.evaluate_log({"eval/percent_correct": accuracy}, task_name="math", samples=samples,
                                start_time=start, end_time=time.time())

    async def wandb_log(self, wandb_metrics: Optional[dict] = None) -> None:
        metrics = drain_metrics(self, wandb_metrics, {"train/percent_correct": self.percent_correct_buffer})
        await super().wandb_log(metrics)


if __name__ == "__main__":
    MathEnv.cli()
