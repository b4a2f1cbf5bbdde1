"""Any reasoning-gym task by name, scored by the task's own ``score_answer`` (Atropos's reasoning-gym env).

reasoning-gym (Apache-2.0) generates its problems procedurally, so this env needs no dataset hub: all
105 of its tasks build offline (tested). ``--env.task basic_arithmetic`` picks one;
``--env.task "chain_sum,countdown"`` mixes several (reasoning-gym's ``composite``, equal weights);
``--env.task_config '{"min_terms": 2}'`` passes task settings through.

The model answers inside ``<answer></answer>`` after an optional thinking block; the reward is the task's
``score_answer(answer, entry)`` in [0, 1] (partial credit where the task gives it), 0 for no answer.

    python environments/reasoning_gym_environment.py process --env.tokenizer_name MODEL_DIR \\
        --openai.base_url http://127.0.0.1:9001/v1 --env.total_steps 2 --env.task countdown
"""

import difflib
from itertools import cycle
from typing import Any

import reasoning_gym
from pydantic import Field
from reasoning_gym.composite import DatasetSpec
from reasoning_gym.factory import DATASETS

from atroposlib.envkit.chat import chat, system_prompt, transcript
from atroposlib.envkit.evaluation import evaluate_items, greedy_answer, report_eval
from atroposlib.envkit.rollouts import SamplingConfig, Trajectories, sample_group
from atroposlib.envkit.servers import local_defaults
from atroposlib.envkit.text_tasks import extract_answer_tag
from atroposlib.envs.base import BaseEnv
from atroposlib.errors import ConfigError
from atroposlib.type_definitions import Item

ANSWER_FORMAT = "Give your final answer, and nothing else, inside <answer></answer> tags."


class ReasoningGymConfig(SamplingConfig):
    task: str = Field(
        default="basic_arithmetic", description="reasoning-gym task name, or a comma list."
    )
    task_config: dict[str, Any] = Field(
        default_factory=dict, description="Settings passed to the task."
    )
    dataset_size: int = Field(default=10000, ge=1, description="Problems generated for training.")
    eval_size: int = Field(
        default=50, ge=1, description="Problems generated (other seed) for evaluate()."
    )
    seed: int = Field(
        default=0, description="Seed of the training problems; evaluation uses seed + 1."
    )


def build_dataset(task: str, task_config: dict[str, Any], size: int, seed: int):
    """A reasoning-gym dataset for one task or a comma list (an unknown name is a ConfigError)."""
    names = [name.strip() for name in task.split(",") if name.strip()]
    for name in names:
        if name not in DATASETS:
            close = difflib.get_close_matches(name, DATASETS, n=3)
            raise ConfigError(
                f"unknown reasoning-gym task {name!r} (--env.task); did you mean {close}?"
            )
    if len(names) == 1:
        return reasoning_gym.create_dataset(names[0], size=size, seed=seed, **task_config)
    specs = [DatasetSpec(name=name, weight=1.0, config=dict(task_config)) for name in names]
    return reasoning_gym.create_dataset("composite", size=size, seed=seed, datasets=specs)


class ReasoningGymEnv(BaseEnv):
    name = "reasoning_gym"
    env_config_cls = ReasoningGymConfig
    config_init = local_defaults(group_size=8, max_token_length=2048, batch_size=16)

    async def setup(self) -> None:
        cfg = self.config
        self.train = build_dataset(cfg.task, cfg.task_config, cfg.dataset_size, cfg.seed)
        self.test = build_dataset(cfg.task, cfg.task_config, cfg.eval_size, cfg.seed + 1)
        self.system = system_prompt(
            ANSWER_FORMAT, thinking=cfg.thinking_mode, thinking_prompt=cfg.custom_thinking_prompt
        )
        self.train_items = cycle(self.train)  # in order, round and round

    async def get_next_item(self) -> Item:
        return next(self.train_items)

    def prompt(self, entry: Item) -> list[dict[str, str]]:
        return chat(self.system, entry["question"])

    def score(self, dataset, response: str, entry: Item) -> float:
        answer = extract_answer_tag(response)
        return 0.0 if answer is None else float(dataset.score_answer(answer, entry))

    async def collect_trajectories(self, item: Item) -> Trajectories:
        messages = self.prompt(item)
        answers, nodes = await sample_group(self, messages)
        group = self.group_builder()
        scores = await self.score_samples(lambda a: self.score(self.train, a, item), answers)
        for answer, node, score in zip(answers, nodes, scores, strict=True):
            if score is not None:
                self.add_metric("train/mean_score", score)
            group.add_node(node, score, messages=transcript(messages, answer))
        return group.build(), []

    async def evaluate(self, *args, **kwargs) -> None:
        async def score(entry: Item) -> float:
            return self.score(self.test, await greedy_answer(self, self.prompt(entry)), entry)

        scores = await evaluate_items(self, self.test, score)
        task_name = f"reasoning_gym/{self.config.task}"
        await report_eval(self, {"eval/mean_score": sum(scores) / len(scores)}, task_name=task_name)


if __name__ == "__main__":
    ReasoningGymEnv.cli()
