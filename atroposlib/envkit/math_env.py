"""``MathAnswerEnv``: the base of the boxed-answer math envs (GSM8K, math, teacher distillation).

What such an env does is the same whatever its problems: a system prompt asking for a ``\\boxed{}``
answer (after a thinking block), ``group_size`` sampled answers through ``managed_server``, +1 for a
math-verify-equivalent answer and -1 otherwise (Atropos's length penalty when a whole group is
right; an item whose gold answer cannot be parsed is skipped, never trained as 0), and an
evaluation on the test problems (greedy, or ``--env.eval_n_samples`` samples: avg@n and pass@k). Answers are scored off the event loop (``self.score_samples``:
math-verify in worker processes, each answer within ``--env.score_timeout``; one without a verdict
has an unavailable reward, never a -1). A subclass says what differs::

    class GSM8kEnv(MathAnswerEnv):
        name = "gsm8k"
        env_config_cls = GSM8kConfig                 # a SamplingConfig with its data settings
        answer_format = "Solve the problem. End your answer with \\\\boxed{...}."
        config_init = local_defaults(group_size=8, max_token_length=2048, batch_size=12)

        def load_problems(self):                     # (train, test), each {"question", "answer"}
            ...

It is part of the package so that every env file built on it runs on its own, outside the repo.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from functools import partial
from itertools import cycle
from typing import Any

from atroposlib.envkit.chat import chat, system_prompt, transcript
from atroposlib.envkit.evaluation import (
    eval_answers,
    eval_sampling,
    evaluate_items,
    report_eval,
    sample_metrics,
)
from atroposlib.envkit.math_scoring import scores_from_verdicts, verify_math
from atroposlib.envkit.rollouts import SamplingConfig, Trajectories, sample_group
from atroposlib.envs.base import BaseEnv
from atroposlib.type_definitions import Item


class MathAnswerEnv(BaseEnv):
    """A boxed-answer math env; subclasses give ``answer_format`` and ``load_problems``."""

    env_config_cls: type[SamplingConfig] = SamplingConfig
    config: SamplingConfig
    answer_format: str = "Solve the problem and put only your final answer in \\boxed{}."
    train: list[Item]
    test: list[Item]
    system: str
    train_items: Iterator[Item]

    def load_problems(self) -> tuple[list[Item], list[Item]]:
        """(training problems, evaluation problems), each ``{"question", "answer"}``."""
        raise NotImplementedError(f"{type(self).__name__} must implement load_problems()")

    async def setup(self) -> None:
        self.train, self.test = self.load_problems()
        self.system = system_prompt(
            self.answer_format, thinking_prompt=self.config.custom_thinking_prompt
        )
        self.train_items = cycle(self.train)  # in order, round and round

    async def get_next_item(self) -> Item:
        return next(self.train_items)

    def prompt(self, item: Item) -> list[dict[str, str]]:
        """The messages that ask ``item``'s question."""
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

    async def evaluate(self, *args: Any, **kwargs: Any) -> None:
        """One greedy answer per problem, or ``--env.eval_n_samples`` sampled ones (then
        avg@n and pass@k too)."""
        start = time.time()

        async def sample(row: Item) -> dict[str, Any]:
            answers = await eval_answers(self, self.prompt(row))
            correct = [bool(verify_math(a, row["answer"])) for a in answers]
            return {
                "question": row["question"],
                "gold_answer": row["answer"],
                "response": answers[0],
                "correct": correct[0],
                **({"responses": answers, "correct_all": correct} if len(answers) > 1 else {}),
            }

        samples = await evaluate_items(self, self.test, sample)  # too-long prompts: skipped
        per_item = [s.get("correct_all", [s["correct"]]) for s in samples]
        n, temperature = eval_sampling(self)
        await report_eval(
            self,
            sample_metrics({"eval/percent_correct": [[float(c) for c in p] for p in per_item]}),
            task_name=self.name,
            samples=samples,
            start_time=start,
            end_time=time.time(),
            generation_parameters={"temperature": temperature, "n": n},
        )


__all__ = ["MathAnswerEnv"]
