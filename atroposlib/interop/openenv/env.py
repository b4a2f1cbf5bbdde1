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
group fails, the next attempt backs off by the one rule of ``interop.driver`` (10 such groups in a row
free, then 0.5 s doubling up to 30 s). ``setup`` opens one session first, so a server that cannot be
used at all ends the run with one line.

A server's MCP tools are offered to the model (``episode.play_episode``, ``tools``); a bad tool call
(``tools.TOOL_ERRORS``) does not drop the episode: the model reads the error, and the call is counted in
``openenv/tool_errors_<kind>`` (one log line per kind); ``openenv/tool_calls`` counts the calls.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import Any, Optional

from atroposlib.errors import ConfigError, RunFailed
from atroposlib.groups import GroupBuilder
from atroposlib.interop.driver import InteropEnv, Standard
from atroposlib.interop.openenv.client import KINDS, EpisodeError, OpenEnvSession
from atroposlib.interop.openenv.episode import Episode, episode_messages, play_episode
from atroposlib.interop.openenv.observation import observation_text
from atroposlib.interop.openenv.settings import OpenEnvEnvConfig, OpenEnvSettings
from atroposlib.interop.openenv.tools import TOOL_ERRORS
from atroposlib.type_definitions import Item


class OpenEnvEnv(InteropEnv[OpenEnvSettings, Episode]):
    """Drives an OpenEnv server over its WebSocket protocol (see the module docstring)."""

    name = "openenv"
    env_config_cls = OpenEnvEnvConfig
    standard = Standard(
        section="openenv",
        title="OpenEnv",
        failure=EpisodeError,
        episode_words="an OpenEnv episode",
        required=("url", "the OpenEnv server, e.g. http://host:8000"),
    )

    def _system_prompt(self) -> Optional[str]:
        return self.settings.system_prompt

    async def _open(self) -> None:
        s = self.settings
        self._next_seed = s.seed
        self._sessions = asyncio.Semaphore(s.max_sessions)
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
        self._log.info(
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

    def _group_episodes(self, item: Item) -> list[Awaitable[Episode]]:
        seed, temperature = int(item["seed"]), self.settings.temperature
        return [self._episode(seed, temperature) for _ in range(self.config.group_size)]

    def _add_to_group(self, group: GroupBuilder, episode: Episode) -> None:
        score = episode.score(self.settings.reward)
        extra: dict[str, Any] = {}
        if self.config.include_messages:
            extra["messages"] = episode_messages(episode, score)
        group.add(
            episode.tokens, episode.masks, score, inference_logprobs=episode.logprobs, **extra
        )
        self.add_metric("openenv/episode_reward", score)
        self.add_metric("openenv/turns", episode.turns)
        self.add_metric("openenv/done", 1.0 if episode.done else 0.0)
        if not episode.extended_every_turn:
            self.add_metric("openenv/retokenized_episodes", 1.0)
        self._count_tool_calls(episode)

    def _count_tool_calls(self, ep: Episode) -> None:
        if ep.tool_calls:
            self.add_metric("openenv/tool_calls", ep.tool_calls)
        for kind, n in ep.tool_errors.items():
            total = self._tool_errors.get(kind, 0) + n
            self._tool_errors[kind] = total
            self.set_metric(f"openenv/tool_errors_{kind}", total)
            if total == n:
                self._log.warning(
                    "an OpenEnv episode made a bad tool call: %s; the model read the error and went "
                    "on (further ones of this kind are counted in openenv/tool_errors_%s, not "
                    "logged)",
                    TOOL_ERRORS[kind],
                    kind,
                )

    def _eval_episodes(self) -> list[tuple[Any, Awaitable[Episode]]]:
        s = self.settings
        seeds = [s.eval_seed + i for i in range(s.eval_episodes)]
        return [(seed, self._episode(seed, s.eval_temperature)) for seed in seeds]

    def _eval_means(self, episodes: list[Episode]) -> dict[str, float]:
        scores = [e.score(self.settings.reward) for e in episodes]
        return {
            "eval/mean_reward": sum(scores) / len(scores),
            "eval/done_fraction": sum(e.done for e in episodes) / len(episodes),
            "eval/mean_turns": sum(e.turns for e in episodes) / len(episodes),
        }

    def _eval_sample(self, key: Any, episode: Episode) -> dict[str, Any]:
        return {
            "seed": key,
            "score": episode.score(self.settings.reward),
            "messages": episode.messages,
        }

    def _drop_count_name(self, kind: str) -> str:
        return f"openenv episode: server {KINDS[kind]}"

    def _drop_reason(self, kind: str, failure: Exception) -> str:
        hint = (
            " (lower --openenv.max_sessions to what the server allows)" if kind == "refused" else ""
        )
        return f"{failure}{hint}"


__all__ = ["OpenEnvEnv"]
