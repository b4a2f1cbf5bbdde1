"""check_env: the helper every environment's test uses."""

from __future__ import annotations

import pytest

from atroposlib.envs.base import APIServerConfig, BaseEnv, BaseEnvConfig, ScoredDataItem
from atroposlib.errors import SchemaError
from atroposlib.testing import check_env
from atroposlib.utils.tokenize_for_trainer import tokenize_for_trainer
from tests.envs.example_env import AdditionEnv


class SingleTrajectoryEnv(BaseEnv):
    """Uses collect_trajectory (one sequence per call) and a text-only flow with tokenize_for_trainer."""

    name = "single"

    @classmethod
    def config_init(cls) -> tuple[BaseEnvConfig, list[APIServerConfig]]:
        return BaseEnvConfig(group_size=3), [
            APIServerConfig(server_type="openai", base_url="http://x/v1")
        ]

    async def get_next_item(self):
        return {"q": "Say hi"}

    async def collect_trajectory(self, item) -> tuple[ScoredDataItem, list]:
        chat = [{"role": "user", "content": item["q"]}]
        out = await self.server.chat_completion(messages=chat, n=1, max_tokens=20)
        chat.append({"role": "assistant", "content": out.choices[0].message.content})
        tok = tokenize_for_trainer(self.tokenizer, chat, finish_reason=out.choices[0].finish_reason)
        return ScoredDataItem(
            tokens=tok["tokens"],
            masks=tok["masks"],
            scores=float(len(chat[-1]["content"]) % 2),
            messages=chat,
        ), []


class BrokenEnv(AdditionEnv):
    async def collect_trajectories(self, item):
        group, backlog = await super().collect_trajectories(item)
        group["masks"][0] = group["masks"][0][:-1]
        return group, backlog


def test_check_env_runs_items_and_returns_valid_groups():
    groups = check_env(
        AdditionEnv,
        responder=lambda p, b: ["7", "The answer is 12", "3", "no"][b["choice_index"]],
        items=2,
    )
    assert len(groups) == 2
    assert all(
        len(g["tokens"]) == 4 and len(g["inference_logprobs"][0]) == len(g["tokens"][0])
        for g in groups
    )


def test_check_env_with_collect_trajectory_and_tokenize_for_trainer():
    groups = check_env(
        SingleTrajectoryEnv, responses=["hi!", "hello"], env_overrides={"group_size": 2}
    )
    assert len(groups) == 1 and len(groups[0]["tokens"]) == 2
    assert groups[0]["messages"][0][-1]["content"] in ("hi!", "hello")


def test_check_env_reports_a_broken_group():
    with pytest.raises(SchemaError, match=r"masks\[0\] has"):
        check_env(BrokenEnv, responses=["7"])
