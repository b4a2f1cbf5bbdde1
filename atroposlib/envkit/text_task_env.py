"""``TextTaskEnv``: the base of the procedural text envs (letter counting, text reversal).

Items come from a seeded generator (``make_item(rng)``: ``{"question", "answer"}``), the model answers
inside ``<answer></answer>`` after an optional thinking block, and the reward is 1.0 for the exact
answer, 0.0 otherwise (a missing tag is 0.0 too); evaluation is one greedy answer per item of a
fixed test set (seed + 1). A subclass says what differs::

    class TextReversalEnv(TextTaskEnv):
        name = "text_reversal"
        instruction = "Write the reversed text, and nothing else, inside <answer></answer> tags."
        config_init = local_defaults(group_size=8, max_token_length=1024, batch_size=16)

        def make_item(self, rng):
            return text_reversal_item(rng, self.config.max_words)

It is part of the package so that every env file built on it runs on its own, outside the repo.
"""

from __future__ import annotations

import random
from typing import Any

from pydantic import Field

from atroposlib.envkit.chat import chat, system_prompt, transcript
from atroposlib.envkit.evaluation import evaluate_items, greedy_answer, report_eval
from atroposlib.envkit.rollouts import SamplingConfig, Trajectories, sample_group
from atroposlib.envkit.text_tasks import extract_answer_tag
from atroposlib.envs.base import BaseEnv
from atroposlib.type_definitions import Item


class TextTaskConfig(SamplingConfig):
    max_words: int = Field(default=3, ge=1, description="Longest phrase, in words.")
    seed: int = Field(
        default=0, description="Seed of the item generator (evaluation uses seed + 1)."
    )
    eval_size: int = Field(default=32, ge=1, description="Items used by evaluate().")


class TextTaskEnv(BaseEnv):
    """A procedural text env; subclasses give ``instruction`` and ``make_item``."""

    env_config_cls: type[TextTaskConfig] = TextTaskConfig
    config: TextTaskConfig
    instruction: str = "Give only the answer inside <answer></answer> tags."
    rng: random.Random
    test: list[Item]
    system: str

    def make_item(self, rng: random.Random) -> Item:
        """One ``{"question", "answer"}`` item drawn with ``rng``."""
        raise NotImplementedError(f"{type(self).__name__} must implement make_item(rng)")

    async def setup(self) -> None:
        self.rng = random.Random(self.config.seed)
        eval_rng = random.Random(self.config.seed + 1)
        self.test = [self.make_item(eval_rng) for _ in range(self.config.eval_size)]
        self.system = system_prompt(
            self.instruction,
            thinking=self.config.thinking_mode,
            thinking_prompt=self.config.custom_thinking_prompt,
        )

    async def get_next_item(self) -> Item:
        return self.make_item(self.rng)

    def prompt(self, item: Item) -> list[dict[str, str]]:
        """The messages that ask ``item``'s question."""
        return chat(self.system, item["question"])

    def score(self, response: str, item: Item) -> float:
        """1.0 for the exact answer inside the tags, else 0.0."""
        return 1.0 if extract_answer_tag(response) == item["answer"] else 0.0

    async def collect_trajectories(self, item: Item) -> Trajectories:
        messages = self.prompt(item)
        answers, nodes = await sample_group(self, messages)
        group = self.group_builder()
        scores = await self.score_samples(lambda answer: self.score(answer, item), answers)
        for answer, node, score in zip(answers, nodes, scores, strict=True):
            if score is not None:
                self.add_metric("train/percent_correct", score)
            group.add_node(node, score, messages=transcript(messages, answer))
        return group.build(), []

    async def evaluate(self, *args: Any, **kwargs: Any) -> None:
        async def score(item: Item) -> float:
            return self.score(await greedy_answer(self, self.prompt(item)), item)

        scores = await evaluate_items(self, self.test, score)
        await report_eval(
            self, {"eval/percent_correct": sum(scores) / len(scores)}, task_name=self.name
        )


__all__ = ["TextTaskConfig", "TextTaskEnv"]
