"""``OpenEnvEnv``: an OpenEnv server's environment trained through atroposlib (a ``BaseEnv``).

    python -m atroposlib.interop.openenv process --openenv.url http://127.0.0.1:8000 \\
        --env.tokenizer_name MODEL --openai.base_url http://127.0.0.1:9001/v1 --openai.server_type vllm

Items are reset seeds (``--openenv.seed``, ``+1`` per item); a group is ``group_size`` episodes that
all reset with the item's seed, so they start from the same state, as GRPO compares them. Each
episode is scored with the env's own rewards (``--openenv.reward``: their sum or the last one) and
carries exact tokens and masks for every turn (``episode.play_episode``). At most
``--openenv.max_sessions`` episodes are open on the server at once.

An episode the server fails (no answer, closed mid-episode, a refused session, a malformed or error
frame; ``client.KINDS``) is dropped: counted in the run's drop counts under its kind, logged once per
kind. A group with a dropped episode is not sent (its size would be wrong); when every episode of a
group fails the next attempt waits longer (up to 30 s). ``setup`` opens one session first, so a
server that cannot be used at all ends the run with one line.

A server's MCP tools are offered to the model (``episode.play_episode``, ``tools``); a bad tool call
(``tools.TOOL_ERRORS``) does not drop the episode: the model reads the error, and the call is counted in
``openenv/tool_errors_<kind>`` (one log line per kind); ``openenv/tool_calls`` counts the calls.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, Optional

from atroposlib.envs.base import BaseEnv, ServerBaseline
from atroposlib.errors import ConfigError, RunFailed
from atroposlib.groups import Groups
from atroposlib.interop.openenv.client import KINDS, EpisodeError, OpenEnvSession
from atroposlib.interop.openenv.episode import (
    Episode,
    TurnTemplate,
    episode_messages,
    play_episode,
    require_exact_tokens,
)
from atroposlib.interop.openenv.observation import observation_text
from atroposlib.interop.openenv.settings import OpenEnvEnvConfig, OpenEnvSettings
from atroposlib.interop.openenv.tools import TOOL_ERRORS
from atroposlib.runtime.config import ServerConfigs
from atroposlib.type_definitions import Item

logger = logging.getLogger(__name__)


class OpenEnvEnv(BaseEnv):
    """Drives an OpenEnv server over its WebSocket protocol (see the module docstring)."""

    name = "openenv"
    env_config_cls = OpenEnvEnvConfig

    @classmethod
    def config_init(cls) -> tuple[OpenEnvEnvConfig, ServerConfigs]:
        return OpenEnvEnvConfig(group_size=4, max_token_length=2048), ServerBaseline(
            server_type="vllm"
        )

    @property
    def settings(self) -> OpenEnvSettings:
        config = self.config
        if not isinstance(config, OpenEnvEnvConfig):
            raise TypeError(f"{type(self).__name__} needs an OpenEnvEnvConfig, got {type(config)}")
        return config.openenv

    async def setup(self) -> None:
        s = self.settings
        if not s.url.strip():
            raise ConfigError(
                "--openenv.url is required (the OpenEnv server, e.g. http://host:8000)"
            )
        require_exact_tokens(self.server, "OpenEnv")
        TurnTemplate.checked(self.tokenizer, s.system_prompt, self.config.tokenizer_name)
        self._next_seed = s.seed
        self._sessions = asyncio.Semaphore(s.max_sessions)
        self._failed_groups_in_a_row = 0
        self._dropped: dict[str, int] = {}
        self._tool_errors: dict[str, int] = {}
        try:
            async with OpenEnvSession(
                s.url, connect_timeout=s.connect_timeout, message_timeout=s.message_timeout
            ) as session:
                first = await session.reset(seed=s.seed, **s.reset_args)
        except EpisodeError as e:
            raise RunFailed(f"cannot use the OpenEnv server at {s.url}: {e}") from None
        if s.observation_field is not None and s.observation_field not in first.observation:
            fields = ", ".join(sorted(first.observation)) or "none"
            raise ConfigError(
                f"--openenv.observation_field {s.observation_field!r}: the reset observation has "
                f"no such field (its fields: {fields})"
            )
        logger.info(
            "OpenEnv server %s: first observation %r",
            s.url,
            observation_text(first.observation, s.observation_field)[:120],
        )

    async def get_next_item(self) -> Optional[Item]:
        seed, self._next_seed = self._next_seed, self._next_seed + 1
        return {"seed": seed}

    async def _episode(self, seed: int, temperature: float) -> Episode:
        async with self._sessions:
            return await play_episode(
                self.server,
                self.tokenizer,
                self.settings,
                seed,
                self.config.max_token_length,
                temperature,
            )

    def _count_drop(self, err: EpisodeError) -> None:
        n = self._dropped.get(err.kind, 0) + 1
        self._dropped[err.kind] = n
        self.context.drop_counts[f"openenv episode: server {KINDS[err.kind]}"] += 1
        self.set_metric(f"openenv/dropped_{err.kind}", n)
        if n == 1:
            hint = ""
            if err.kind == "refused":
                hint = " (lower --openenv.max_sessions to what the server allows)"
            logger.warning(
                "dropped an OpenEnv episode: %s%s (further drops of this kind are counted, not "
                "logged)",
                err,
                hint,
            )

    def _count_tool_calls(self, ep: Episode) -> None:
        if ep.tool_calls:
            self.add_metric("openenv/tool_calls", ep.tool_calls)
        for kind, n in ep.tool_errors.items():
            total = self._tool_errors.get(kind, 0) + n
            self._tool_errors[kind] = total
            self.set_metric(f"openenv/tool_errors_{kind}", total)
            if total == n:
                logger.warning(
                    "an OpenEnv episode made a bad tool call: %s; the model read the error and went "
                    "on (further ones of this kind are counted in openenv/tool_errors_%s, not "
                    "logged)",
                    TOOL_ERRORS[kind],
                    kind,
                )

    async def _play(self, seeds: list[int], temperature: float) -> list[Episode | EpisodeError]:
        """Play episodes concurrently; server failures come back as values, anything else raises."""
        results = await asyncio.gather(
            *[self._episode(seed, temperature) for seed in seeds], return_exceptions=True
        )
        out: list[Episode | EpisodeError] = []
        for r in results:
            if isinstance(r, EpisodeError):
                self._count_drop(r)
                out.append(r)
            elif isinstance(r, BaseException):
                raise r
            else:
                out.append(r)
        return out

    async def collect_trajectories(self, item: Item) -> tuple[Groups, list[Item]]:
        seed = int(item["seed"])
        played = await self._play([seed] * self.config.group_size, self.settings.temperature)
        episodes = [e for e in played if isinstance(e, Episode)]
        if len(episodes) < len(played):
            if not episodes:
                self._failed_groups_in_a_row += 1
                await asyncio.sleep(min(30.0, 0.5 * 2 ** (self._failed_groups_in_a_row - 1)))
            return None, []
        self._failed_groups_in_a_row = 0
        group = self.group_builder()
        for ep in episodes:
            score = ep.score(self.settings.reward)
            extra: dict[str, Any] = {}
            if self.config.include_messages:
                extra["messages"] = episode_messages(ep, score)
            group.add(ep.tokens, ep.masks, score, inference_logprobs=ep.logprobs, **extra)
            self.add_metric("openenv/episode_reward", score)
            self.add_metric("openenv/turns", ep.turns)
            self.add_metric("openenv/done", 1.0 if ep.done else 0.0)
            if not ep.extended_every_turn:
                self.add_metric("openenv/retokenized_episodes", 1.0)
            self._count_tool_calls(ep)
        return group.build(), []

    async def evaluate(self, *args: Any, **kwargs: Any) -> None:
        s = self.settings
        seeds = [s.eval_seed + i for i in range(s.eval_episodes)]
        played = await self._play(seeds, s.eval_temperature)
        episodes = [e for e in played if isinstance(e, Episode)]
        metrics: dict[str, Any] = {"eval/dropped_episodes": len(played) - len(episodes)}
        if episodes:
            scores = [e.score(s.reward) for e in episodes]
            metrics["eval/mean_reward"] = sum(scores) / len(scores)
            metrics["eval/done_fraction"] = sum(e.done for e in episodes) / len(episodes)
            metrics["eval/mean_turns"] = sum(e.turns for e in episodes) / len(episodes)
        samples = [
            {"seed": seed, "score": e.score(s.reward), "messages": e.messages}
            for seed, e in zip(seeds, played, strict=True)
            if isinstance(e, Episode)
        ]
        await self.evaluate_log(metrics=metrics, task_name=self.name, samples=samples)


__all__ = ["OpenEnvEnv"]
