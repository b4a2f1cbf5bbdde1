"""``VerifiersEnv``: a verifiers v1 taskset trained through atroposlib (a ``BaseEnv``).

    python -m atroposlib.interop.verifiers process --verifiers.env my-taskset \\
        --verifiers.args '{"n": 100}' --env.tokenizer_name MODEL \\
        --openai.base_url http://127.0.0.1:9001/v1 --openai.server_type vllm

The taskset is loaded in-process (``loading``); items are its tasks in ``load()`` order (a finite
taskset starts over when it runs out). A group is ``group_size`` episodes of one task, each played
by the verifiers env's own ``run`` with our policy in its agent seat (``rollout``), sampled from the
``--openai.*`` servers through the managed server (exact tokens, masks and logprobs) and scored by
the task's own rubric. An episode the taskset's code fails (its rubric or its env raised, a prompt
over ``max_token_length``) is dropped: counted in the run's drop counts, logged once per kind; a
group with a dropped episode is not sent (``process`` then ends non-zero once its attempts are
spent, its one line naming the drops). Inference failures are left to the runtime (counted,
backed off, fatal when permanent).
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections.abc import Iterator
from typing import Any, Optional

from atroposlib.envs.base import BaseEnv, ServerBaseline
from atroposlib.errors import ConfigError
from atroposlib.groups import Groups
from atroposlib.interop.openenv.episode import TurnTemplate, require_exact_tokens
from atroposlib.interop.verifiers.loading import LoadedTaskset, load_taskset
from atroposlib.interop.verifiers.rollout import KINDS, EpisodeFailed, EpisodeGame, Played
from atroposlib.interop.verifiers.settings import VerifiersEnvConfig, VerifiersSettings
from atroposlib.runtime.config import ServerConfigs
from atroposlib.runtime.failures import one_line
from atroposlib.type_definitions import Item

logger = logging.getLogger(__name__)


def _first_tasks(loaded: LoadedTaskset, n: int, what: str) -> list[Any]:
    """The taskset's first ``n`` tasks; a taskset whose ``load()`` raises or yields nothing is a
    ``ConfigError`` (nothing could be trained)."""
    try:
        tasks = list(itertools.islice(iter(loaded.taskset), n))
    except Exception as e:  # noqa: BLE001 - the taskset's own load() failed
        raise ConfigError(
            f"--verifiers.env {loaded.taskset_id}: loading its tasks raised {one_line(e)}"
        ) from None
    if not tasks:
        raise ConfigError(f"--verifiers.env {loaded.taskset_id}: {what} yielded no task")
    return tasks


class VerifiersEnv(BaseEnv):
    """Plays a verifiers v1 taskset's tasks with our policy (see the module docstring)."""

    name = "verifiers"
    env_config_cls = VerifiersEnvConfig

    @classmethod
    def config_init(cls) -> tuple[VerifiersEnvConfig, ServerConfigs]:
        return VerifiersEnvConfig(group_size=4, max_token_length=2048), ServerBaseline(
            server_type="vllm"
        )

    @property
    def settings(self) -> VerifiersSettings:
        config = self.config
        if not isinstance(config, VerifiersEnvConfig):
            raise TypeError(f"{type(self).__name__} needs a VerifiersEnvConfig, got {type(config)}")
        return config.verifiers

    async def setup(self) -> None:
        s = self.settings
        if not s.env.strip():
            raise ConfigError(
                "--verifiers.env is required (an installed taskset id or a module exporting a "
                "Taskset)"
            )
        require_exact_tokens(self.server, "verifiers")
        self._template = TurnTemplate.checked(self.tokenizer, None, self.config.tokenizer_name)
        self._loaded = load_taskset(s.env, s.args)
        first = _first_tasks(self._loaded, 1, "--verifiers.args")[0]
        self._tasks: Iterator[Any] = self._cycle()
        self._epoch = 0
        self._dropped: dict[str, int] = {}
        self._warned: set[str] = set()
        self._failed_groups_in_a_row = 0
        logger.info(
            "verifiers taskset %s (env %s, seat %r): first task %r",
            s.env,
            type(self._loaded.env).__name__,
            self._loaded.seat,
            str(first.data.prompt)[:120],
        )

    def _cycle(self) -> Iterator[Any]:
        while True:
            n = 0
            for task in self._loaded.taskset:
                n += 1
                yield task
            if n == 0:
                return
            self._epoch += 1

    async def get_next_item(self) -> Optional[Item]:
        task = next(self._tasks, None)
        if task is None:
            return None
        return {"task": task, "epoch": self._epoch}

    def _game(self, loaded: LoadedTaskset, temperature: float) -> EpisodeGame:
        return EpisodeGame(
            loaded,
            self.server,
            self.tokenizer,
            self._template,
            self.settings,
            self.config.max_token_length,
            temperature,
            self._warned,
        )

    def _count_drop(self, err: EpisodeFailed) -> None:
        n = self._dropped.get(err.kind, 0) + 1
        self._dropped[err.kind] = n
        self.context.drop_counts[f"verifiers episode: {KINDS[err.kind]}"] += 1
        self.set_metric(f"verifiers/dropped_{err.kind}", n)
        if n == 1:
            logger.warning(
                "dropped a verifiers episode: %s: %s (further drops of this kind are counted, "
                "not logged)",
                KINDS[err.kind],
                err,
            )

    async def _play(
        self, loaded: LoadedTaskset, tasks: list[Any], temperature: float
    ) -> list[Played | EpisodeFailed]:
        """Play episodes concurrently; the taskset's failures come back as values."""
        results = await asyncio.gather(
            *[self._game(loaded, temperature).play(t) for t in tasks], return_exceptions=True
        )
        out: list[Played | EpisodeFailed] = []
        for r in results:
            if isinstance(r, EpisodeFailed):
                self._count_drop(r)
                out.append(r)
            elif isinstance(r, BaseException):
                raise r
            else:
                out.append(r)
        return out

    async def collect_trajectories(self, item: Item) -> tuple[Groups, list[Item]]:
        task = item["task"]
        played = await self._play(
            self._loaded, [task] * self.config.group_size, self.settings.temperature
        )
        episodes = [e for e in played if isinstance(e, Played)]
        if len(episodes) < len(played):
            if not episodes:
                # a taskset whose every episode fails: after 10 such groups in a row, wait
                # longer and longer (up to 30 s) instead of hot-looping (process stops sooner)
                self._failed_groups_in_a_row += 1
                if self._failed_groups_in_a_row > 10:
                    await asyncio.sleep(min(30.0, 0.5 * 2 ** (self._failed_groups_in_a_row - 11)))
            return None, []
        self._failed_groups_in_a_row = 0
        group = self.group_builder()
        for ep in episodes:
            extra: dict[str, Any] = {}
            if self.config.include_messages:
                summary = (
                    f"score {ep.reward:g} from {ep.rewards} after {ep.turns} turn(s); {ep.note}"
                )
                extra["messages"] = [*ep.messages, {"role": "grader", "content": summary}]
            group.add(ep.tokens, ep.masks, ep.reward, inference_logprobs=ep.logprobs, **extra)
            self.add_metric("verifiers/reward", ep.reward)
            self.add_metric("verifiers/turns", ep.turns)
            for k, v in ep.rewards.items():
                self.add_metric(f"verifiers/reward_{k}", v)
            for k, v in ep.metrics.items():
                self.add_metric(f"verifiers/metric_{k}", v)
            if not ep.extended_every_turn:
                self.add_metric("verifiers/retokenized_episodes", 1.0)
        return group.build(), []

    async def evaluate(self, *args: Any, **kwargs: Any) -> None:
        s = self.settings
        loaded = self._loaded
        if s.eval_args is not None:
            loaded = load_taskset(s.env, s.eval_args, flag="--verifiers.eval_args")
        tasks = _first_tasks(loaded, s.eval_tasks, "--verifiers.eval_args")
        played = await self._play(loaded, tasks, s.eval_temperature)
        episodes = [e for e in played if isinstance(e, Played)]
        metrics: dict[str, Any] = {"eval/dropped_episodes": len(played) - len(episodes)}
        if episodes:
            metrics["eval/mean_reward"] = sum(e.reward for e in episodes) / len(episodes)
            metrics["eval/mean_turns"] = sum(e.turns for e in episodes) / len(episodes)
        samples = [
            {"task": t.data.idx, "score": e.reward, "rewards": e.rewards, "messages": e.messages}
            for t, e in zip(tasks, played, strict=True)
            if isinstance(e, Played)
        ]
        await self.evaluate_log(metrics=metrics, task_name=self.name, samples=samples)


__all__ = ["VerifiersEnv"]
