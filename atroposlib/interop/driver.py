"""``InteropEnv``: what every driver of another standard's environment shares (OpenEnv, verifiers).

A driver is a ``BaseEnv`` whose episodes are played by another standard's code (an OpenEnv server, a
verifiers taskset). The skeleton is the same for each, and lives here:

- its config is ``BaseEnvConfig`` plus one section named after the standard (``--openenv.*``,
  ``--verifiers.*``: ``settings``), with ``group_size`` 4, ``max_token_length`` 2048 and the ``vllm``
  server type by default (exact token ids are needed);
- a group is ``group_size`` episodes played at once; an episode the standard's code fails (its
  ``Standard.failure`` exception, with a ``kind``) is dropped: counted in the run's drop counts and in
  ``<standard>/dropped_<kind>``, logged once per kind. Anything else an episode raises ends the item
  as any env's exception does (the runtime counts it and backs off);
- a group with a dropped episode is not sent (GRPO needs the whole group);
- ``evaluate`` plays the evaluation episodes and logs ``eval/dropped_episodes`` plus the driver's
  means, with one sample per played episode.

The back-off after failed groups (``failed_group_delay``), one rule for every driver: a group whose
EVERY episode was dropped counts as failed; the first ``FREE_FAILED_GROUPS`` (10) failed groups in a
row are retried at once, then each further one waits 0.5 s, doubling, at most 30 s (the steps of the
runtime's back-off after failed items, ``runtime.failures``); a group that is sent resets the count (a
partly dropped one leaves it). Why this rule rather than a wait from the first failed group: the
first run of a new env is a short ``process`` (``--env.total_steps 1``: at most 11 attempts), and on a
broken env or server (a wrong ``--openenv.action_field``, a rubric that raises) it should end at once
with its one line naming the drops, not after minutes of waits that cannot help; one failed group among
good ones (a server restart, a flaky task) costs no wait; and ``serve``, which never stops on its own,
still does not hot-loop on an env that fails every episode: after the 10th failed group in a row it
waits longer and longer, and picks up within 30 s once the env works again. A wait from the first
failed group (what the OpenEnv driver did) made that short run sleep about 3 minutes.

``setup`` checks what every driver needs (the required setting, an inference server that returns
token ids, a chat template that renders turns verbatim: ``interop.turns``). Each standard's driver
supplies only what differs: the rest of its set-up (``_open``), ``get_next_item``, the episodes of a
group and of ``evaluate`` (awaitables), how an episode becomes a sequence of the group, the
evaluation means and samples, and the words of its drop counts.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Generic, Optional, Protocol, TypeVar, cast

from atroposlib.envs.base import BaseEnv, ServerBaseline
from atroposlib.errors import ConfigError
from atroposlib.groups import GroupBuilder, Groups
from atroposlib.interop.turns import TurnTemplate, require_exact_tokens
from atroposlib.runtime.config import BaseEnvConfig, ServerConfigs
from atroposlib.type_definitions import Item

EpisodeT = TypeVar("EpisodeT")
SettingsT = TypeVar("SettingsT")

FREE_FAILED_GROUPS = 10
"""Failed groups in a row retried without a wait (see the module docstring for why 10)."""
BACKOFF_FIRST_S = 0.5
BACKOFF_MAX_S = 30.0


class _Kinded(Protocol):
    kind: str  # a key of the standard's KINDS


@dataclass(frozen=True)
class Standard:
    """A standard as its driver names it."""

    section: str
    """The settings section and the metric prefix: ``openenv`` -> ``--openenv.*``, ``openenv/...``."""
    title: str
    """The standard in messages: ``"OpenEnv"``."""
    failure: type[Exception]
    """What the standard's code raises for an episode it failed; it carries a ``kind``."""
    episode_words: str
    """An episode in the drop log line: ``"an OpenEnv episode"``."""
    required: tuple[str, str]
    """The setting every run must give and what it is: ``("url", "the OpenEnv server, ...")``."""


def failed_group_delay(failed_in_a_row: int) -> float:
    """Seconds to wait after the ``failed_in_a_row``-th failed group in a row: none for the first
    ``FREE_FAILED_GROUPS``, then 0.5 s, 1 s, 2 s, ... at most 30 s."""
    past_free = failed_in_a_row - FREE_FAILED_GROUPS
    if past_free < 1:
        return 0.0
    return min(BACKOFF_MAX_S, BACKOFF_FIRST_S * 2 ** (past_free - 1))


class InteropEnv(BaseEnv, Generic[SettingsT, EpisodeT]):
    """The shared driver of another standard's environment (see the module docstring)."""

    standard: ClassVar[Standard]
    """Which standard this driver plays, in the words its flags, metrics and messages use."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._dropped: dict[str, int] = {}
        self._failed_groups_in_a_row = 0

    @classmethod
    def config_init(cls) -> tuple[BaseEnvConfig, ServerConfigs]:
        return cls.env_config_cls(group_size=4, max_token_length=2048), ServerBaseline(
            server_type="vllm"
        )

    @property
    def settings(self) -> SettingsT:
        """This run's ``--<standard>.*`` section."""
        config = self.config
        if not isinstance(config, self.env_config_cls):
            raise TypeError(
                f"{type(self).__name__} needs a {self.env_config_cls.__name__}, got {type(config)}"
            )
        return cast(SettingsT, getattr(config, self.standard.section))

    async def setup(self) -> None:
        """What every driver checks before it plays anything (the required setting, an inference
        server that returns token ids, a chat template that renders turns verbatim), then
        ``_open``."""
        std = self.standard
        name, what = std.required
        if not str(getattr(self.settings, name)).strip():
            raise ConfigError(f"--{std.section}.{name} is required ({what})")
        require_exact_tokens(self.server, std.title)
        self._template = TurnTemplate.checked(
            self.tokenizer, self._system_prompt(), self.config.tokenizer_name
        )
        await self._open()

    # --- what each standard supplies ---------------------------------------------------------
    async def _open(self) -> None:
        """The standard's own set-up (its server's first session, its taskset)."""
        raise NotImplementedError

    def _system_prompt(self) -> Optional[str]:
        """The system message before an episode's first turn (none unless a driver has one)."""
        return None

    def _group_episodes(self, item: Item) -> list[Awaitable[EpisodeT]]:
        """The ``group_size`` episodes of ``item``, at the training temperature."""
        raise NotImplementedError

    def _add_to_group(self, group: GroupBuilder, episode: EpisodeT) -> None:
        """Add one played episode to ``group`` (and its metrics)."""
        raise NotImplementedError

    def _eval_episodes(self) -> list[tuple[Any, Awaitable[EpisodeT]]]:
        """The evaluation episodes, each with what its sample is keyed by (a seed, a task)."""
        raise NotImplementedError

    def _eval_means(self, episodes: list[EpisodeT]) -> dict[str, float]:
        """``eval/...`` means over the played evaluation episodes (at least one)."""
        raise NotImplementedError

    def _eval_sample(self, key: Any, episode: EpisodeT) -> dict[str, Any]:
        """The logged sample of one played evaluation episode."""
        raise NotImplementedError

    def _drop_count_name(self, kind: str) -> str:
        """The name of a dropped episode's ``kind`` in the run's drop counts."""
        raise NotImplementedError

    def _drop_reason(self, kind: str, failure: Exception) -> str:
        """What the one log line of a kind says after ``dropped <standard.episode_words>: ``."""
        raise NotImplementedError

    # --- the shared skeleton ---------------------------------------------------------------------
    @property
    def _log(self) -> logging.Logger:
        return logging.getLogger(type(self).__module__)

    def _count_drop(self, failure: Exception) -> None:
        kind = cast(_Kinded, failure).kind
        n = self._dropped[kind] = self._dropped.get(kind, 0) + 1
        self.context.drop_counts[self._drop_count_name(kind)] += 1
        self.set_metric(f"{self.standard.section}/dropped_{kind}", n)
        if n == 1:
            self._log.warning(
                "dropped %s: %s (further drops of this kind are counted, not logged)",
                self.standard.episode_words,
                self._drop_reason(kind, failure),
            )

    async def _play(self, episodes: Sequence[Awaitable[EpisodeT]]) -> list[Optional[EpisodeT]]:
        """Play episodes at once; a dropped one (counted here) is None, anything else raises."""
        results = await asyncio.gather(*episodes, return_exceptions=True)
        played: list[Optional[EpisodeT]] = []
        for r in results:
            if isinstance(r, self.standard.failure):
                self._count_drop(r)
                played.append(None)
            elif isinstance(r, BaseException):
                raise r
            else:
                played.append(r)
        return played

    async def _back_off(self) -> None:
        """One more failed group in a row; wait as ``failed_group_delay`` says."""
        self._failed_groups_in_a_row += 1
        delay = failed_group_delay(self._failed_groups_in_a_row)
        if delay > 0:
            await asyncio.sleep(delay)

    async def collect_trajectories(self, item: Item) -> tuple[Groups, list[Item]]:
        played = await self._play(self._group_episodes(item))
        episodes = [e for e in played if e is not None]
        if len(episodes) < len(played):
            if not episodes:
                await self._back_off()
            return None, []
        self._failed_groups_in_a_row = 0
        group = self.group_builder()
        for episode in episodes:
            self._add_to_group(group, episode)
        return group.build(), []

    async def evaluate(self, *args: Any, **kwargs: Any) -> None:
        keyed = self._eval_episodes()
        played = await self._play([episode for _, episode in keyed])
        episodes = [e for e in played if e is not None]
        metrics: dict[str, Any] = {"eval/dropped_episodes": len(played) - len(episodes)}
        if episodes:
            metrics.update(self._eval_means(episodes))
        samples = [
            self._eval_sample(key, e)
            for (key, _), e in zip(keyed, played, strict=True)
            if e is not None
        ]
        await self.evaluate_log(metrics=metrics, task_name=self.name, samples=samples)


__all__ = ["FREE_FAILED_GROUPS", "InteropEnv", "Standard", "failed_group_delay"]
