"""Letter counting: "How many times does the letter "r" appear in "strawberry"?" — procedural, no data.

Phrases of 1-3 words come from reasoning-gym's bundled word list (random pronounceable strings if it is
missing); half the questions ask for a letter that occurs, the rest for any letter (answer may be 0).
The model answers inside ``<answer></answer>`` after an optional thinking block.

Reward: 1.0 for the exact count, 0.0 otherwise (a missing tag is 0.0 too).

    python environments/letter_counting_environment.py process --env.tokenizer_name MODEL_DIR \\
        --openai.base_url http://127.0.0.1:9001/v1 --env.total_steps 2
"""

import random

from pydantic import Field

from atroposlib.envkit.chat import chat, system_prompt, transcript
from atroposlib.envkit.evaluation import evaluate_items, greedy_answer, report_eval
from atroposlib.envkit.rollouts import SamplingConfig, Trajectories, sample_group
from atroposlib.envkit.servers import local_defaults
from atroposlib.envkit.text_tasks import (
    extract_answer_tag,
    letter_counting_item,
    text_reversal_item,
)
from atroposlib.envs.base import BaseEnv
from atroposlib.type_definitions import Item


class TextTaskConfig(SamplingConfig):
    max_words: int = Field(default=3, ge=1, description="Longest phrase, in words.")
    seed: int = Field(
        default=0, description="Seed of the item generator (evaluation uses seed + 1)."
    )
    eval_size: int = Field(default=32, ge=1, description="Items used by evaluate().")


class LetterCountingEnv(BaseEnv):
    """Also the base of ``TextReversalEnv``: only ``make_item`` and the instruction differ."""

    name = "letter_counting"
    env_config_cls = TextTaskConfig
    instruction = "Count carefully, then give only the number inside <answer></answer> tags."

    def make_item(self, rng: random.Random) -> Item:
        return letter_counting_item(rng, self.config.max_words)

    config_init = local_defaults(group_size=8, max_token_length=1024, batch_size=16)

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
        return chat(self.system, item["question"])

    def score(self, response: str, item: Item) -> float:
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

    async def evaluate(self, *args, **kwargs) -> None:
        async def score(item: Item) -> float:
            return self.score(await greedy_answer(self, self.prompt(item)), item)

        scores = await evaluate_items(self, self.test, score)
        await report_eval(
            self, {"eval/percent_correct": sum(scores) / len(scores)}, task_name=self.name
        )


class TextReversalEnv(LetterCountingEnv):
    """Reverse a short phrase character by character (see text_reversal_environment.py)."""

    name = "text_reversal"
    instruction = "Write the reversed text, and nothing else, inside <answer></answer> tags."

    def make_item(self, rng: random.Random) -> Item:
        return text_reversal_item(rng, self.config.max_words)


if __name__ == "__main__":
    LetterCountingEnv.cli()
