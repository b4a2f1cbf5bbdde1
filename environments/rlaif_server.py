"""RLAIF: a judge model scores the policy's answers (Atropos's ``rlaif_server``), single or pairwise.

Two inference servers: the policy (``--openai.*``) samples ``group_size`` answers; the judge (flat
``--env.judge_*`` fields, or ``judge_*`` in the YAML's ``env`` block) grades them. With no
``judge_base_url`` the policy server judges itself.

* ``judge_mode=single``: each answer gets "Score: N" (1-10), mapped to [0, 1].
* ``judge_mode=pairwise``: answer i is compared with answer i+1 (both orders, to cancel position bias);
  its reward is its share of wins.

A judge that is unreachable or answers without a readable verdict is an infrastructure failure: the
group is sent with ``reward_status="unavailable"`` (the trainer masks it), never scored 0.

Data: a hub dataset with a prompt column (``--env.hub_path``, ``--env.prompt_field``) when online;
offline, open-ended instructions built from templates x topics.

    python environments/rlaif_server.py process --env.tokenizer_name MODEL_DIR \\
        --openai.base_url http://127.0.0.1:9001/v1 --env.judge_base_url http://127.0.0.1:9002/v1 \\
        --env.total_steps 2
"""

import asyncio
import logging
from itertools import cycle
from typing import Literal, Optional

from pydantic import Field

from atroposlib.envkit.chat import chat, transcript
from atroposlib.envkit.data_sources import load_hub_rows
from atroposlib.envkit.judge import (
    JUDGE_SYSTEM,
    offline_prompts,
    pairwise_judge_prompt,
    parse_preference,
    parse_score,
    single_judge_prompt,
)
from atroposlib.envkit.rollouts import SamplingConfig, Trajectories, sample_group
from atroposlib.envkit.servers import extra_server, local_defaults
from atroposlib.envs.base import BaseEnv
from atroposlib.errors import InferenceError
from atroposlib.type_definitions import Item

logger = logging.getLogger(__name__)


class RLAIFConfig(SamplingConfig):
    judge_base_url: Optional[str] = Field(
        default=None, pattern=r"^https?://", description="Judge server URL (None: the policy)."
    )
    judge_model_name: str = Field(default="judge", description="Model name sent to the judge.")
    judge_server_type: Literal["openai", "vllm", "sglang", "trl"] = Field(
        default="openai", description="Judge backend; text only is enough."
    )
    judge_api_key: str = Field(default="x", description="Judge API key.")
    judge_mode: Literal["single", "pairwise"] = Field(
        default="single", description="How the judge grades."
    )
    judge_max_tokens: int = Field(default=512, ge=1, description="Judge's completion budget.")
    judge_wait_s: float = Field(
        default=60.0, gt=0, description="How long to wait for a down judge."
    )
    hub_path: Optional[str] = Field(
        default=None, description="Hub dataset of prompts (None: offline prompts)."
    )
    prompt_field: str = Field(default="prompt", description="Column holding the prompt.")
    offline_size: int = Field(default=500, ge=1, description="Offline prompts to generate.")
    temperature: float = Field(default=1.0, ge=0.0, description="Policy sampling temperature.")


class RLAIFEnv(BaseEnv):
    name = "rlaif"
    env_config_cls = RLAIFConfig
    config_init = local_defaults(group_size=4, max_token_length=2048, batch_size=16)

    async def setup(self) -> None:
        cfg = self.config
        if cfg.hub_path:
            self.prompts = [row[cfg.prompt_field] for row in load_hub_rows(cfg.hub_path)]
        else:
            self.prompts = offline_prompts(cfg.offline_size, seed=0)
        self.judge = (
            self.server
            if cfg.judge_base_url is None
            else extra_server(
                cfg.judge_base_url,
                cfg.judge_model_name,
                cfg.judge_server_type,
                cfg.judge_api_key,
                unavailable_wait=cfg.judge_wait_s,
            )
        )
        self.prompt_items = cycle(self.prompts)  # in order, round and round
        self.judge_failures = 0
        self.set_metric("train/judge_failures", 0)

    async def get_next_item(self) -> Item:
        return {"prompt": next(self.prompt_items)}

    async def ask_judge(self, prompt: str) -> str:
        completion = await self.judge.chat_completion(
            messages=chat(JUDGE_SYSTEM, prompt),
            n=1,
            temperature=0.0,
            max_tokens=self.config.judge_max_tokens,
        )
        return completion.choices[0].message.content or ""

    async def judge_group(self, question: str, answers: list[str]) -> Optional[list[float]]:
        """Rewards for ``answers``, or None when the judge failed (unreachable or unreadable)."""
        try:
            if self.config.judge_mode == "single":
                verdicts = await asyncio.gather(
                    *[self.ask_judge(single_judge_prompt(question, a)) for a in answers]
                )
                scores = [parse_score(v) for v in verdicts]
                return None if any(s is None for s in scores) else scores  # type: ignore[return-value]
            n, wins = len(answers), [0.0] * len(answers)
            pairs = [(i, (i + 1) % n) for i in range(n)]
            ordered = [(a, b) for i, j in pairs for a, b in ((i, j), (j, i))]
            verdicts = await asyncio.gather(
                *[
                    self.ask_judge(pairwise_judge_prompt(question, answers[a], answers[b]))
                    for a, b in ordered
                ]
            )
            for (a, b), verdict in zip(ordered, verdicts, strict=True):
                preferred = parse_preference(verdict)
                if preferred is None:
                    return None
                wins[a if preferred == "A" else b] += 1.0
            return [w / 4.0 for w in wins]  # each answer takes part in 4 comparisons
        except InferenceError as exc:
            logger.warning("judge request failed: %s", exc)
            return None

    async def collect_trajectories(self, item: Item) -> Trajectories:
        messages = [{"role": "user", "content": item["prompt"]}]
        answers, nodes = await sample_group(self, messages)
        scores = await self.judge_group(item["prompt"], answers)
        unavailable = scores is None
        self.judge_failures += unavailable
        self.set_metric("train/judge_failures", self.judge_failures)
        group = self.group_builder()
        for answer, node, score in zip(answers, nodes, scores or [0.0] * len(answers), strict=True):
            group.add_node(
                node, score, reward_unavailable=unavailable, messages=transcript(messages, answer)
            )
        return group.build(), []


if __name__ == "__main__":
    RLAIFEnv.cli()
