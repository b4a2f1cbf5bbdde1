"""Single-turn tool calling in the Hermes format, compared with a reference call (Atropos's tool_calling_server).

The system prompt lists the tools as JSON schemas inside ``<tools></tools>``; the model must answer with
``<tool_call>{"name": ..., "arguments": {...}}</tool_call>``. The calls are parsed and compared with the
item's reference calls (order-free; ``10`` equals ``10.0``, whitespace inside strings is ignored).

A malformed call (bad JSON, no name, unclosed tag, arguments not an object) is a failure with a visible
reason: the score is 0 and the reason is kept in the group's messages as a ``grader`` note and counted
in ``train/malformed_tool_calls``. Nothing is dropped silently.

Data: Atropos trains on a hub dataset of Hermes function-calling conversations; offline we generate
tasks over a built-in tool box (weather lookup, unit conversion, calculator), each with its exact
reference call. ``--env.tools '["get_weather"]'`` offers fewer tools: a shorter prompt (e.g. for the
512-token tiny model). Reward: the share of reference calls matched (1.0 = exact), 0 for malformed output.

    python environments/tool_calling_server.py process --env.tokenizer_name MODEL_DIR \\
        --openai.base_url http://127.0.0.1:9001/v1 --env.total_steps 2
"""

import random

from pydantic import Field

from atroposlib.envkit.chat import chat, require_room, transcript
from atroposlib.envkit.rollouts import SamplingConfig, Trajectories, sample_group
from atroposlib.envkit.servers import local_defaults
from atroposlib.envkit.tool_calls import (
    TOOLBOX,
    compare_tool_calls,
    hermes_system_prompt,
    parse_tool_calls,
    single_turn_task,
)
from atroposlib.envs.base import BaseEnv
from atroposlib.errors import ConfigError
from atroposlib.type_definitions import Item


class ToolCallingConfig(SamplingConfig):
    tools: list[str] = Field(
        default_factory=lambda: list(TOOLBOX),
        description="Tools offered (and asked for); fewer tools = a shorter prompt.",
    )
    seed: int = Field(default=0, description="Seed of the task generator.")


class ToolCallingEnv(BaseEnv):
    name = "tool_calling"
    env_config_cls = ToolCallingConfig
    config_init = local_defaults(group_size=8, max_token_length=2048, batch_size=16)

    async def setup(self) -> None:
        unknown = sorted(set(self.config.tools) - set(TOOLBOX))
        if unknown or not self.config.tools:
            raise ConfigError(
                f"--env.tools: unknown or no tools {unknown}; choose from {sorted(TOOLBOX)}"
            )
        self.rng = random.Random(self.config.seed)
        self.system = hermes_system_prompt([TOOLBOX[name] for name in self.config.tools])
        require_room(self.tokenizer, chat(self.system, "?"), self.config.max_token_length)
        self.malformed = 0
        self.set_metric("train/malformed_tool_calls", 0)

    async def get_next_item(self) -> Item:
        return single_turn_task(self.rng, self.config.tools)

    async def collect_trajectories(self, item: Item) -> Trajectories:
        messages = chat(self.system, item["question"])
        answers, nodes = await sample_group(self, messages)
        group = self.group_builder()
        parses = await self.score_samples(parse_tool_calls, answers)
        for answer, node, parsed in zip(answers, nodes, parses, strict=True):
            if parsed is None:  # the parser timed out or raised: no score (counted)
                group.add_node(node, None, messages=transcript(messages, answer, "no score"))
                continue
            score, reason = compare_tool_calls(parsed, item["reference"])
            self.malformed += len(parsed.errors)
            self.set_metric("train/malformed_tool_calls", self.malformed)
            self.add_metric("train/mean_score", score)
            group.add_node(node, score, messages=transcript(messages, answer, reason))
        return group.build(), []


if __name__ == "__main__":
    ToolCallingEnv.cli()
