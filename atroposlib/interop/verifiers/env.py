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
spent, its one line naming the drops); when every episode of a group fails, the next attempt backs
off by the one rule of ``interop.driver`` (10 such groups in a row free, then 0.5 s doubling up to
30 s). Inference failures are left to the runtime (counted, backed off, fatal when permanent).
"""

from __future__ import annotations

import itertools
from collections.abc import Awaitable, Iterator
from typing import Any, Optional

from atroposlib.errors import ConfigError
from atroposlib.groups import GroupBuilder
from atroposlib.interop.driver import InteropEnv, Standard
from atroposlib.interop.verifiers.loading import LoadedTaskset, load_taskset
from atroposlib.interop.verifiers.rollout import KINDS, EpisodeFailed, EpisodeGame, Played
from atroposlib.interop.verifiers.settings import VerifiersEnvConfig, VerifiersSettings
from atroposlib.runtime.failures import one_line
from atroposlib.type_definitions import Item


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


class VerifiersEnv(InteropEnv[VerifiersSettings, Played]):
    """Plays a verifiers v1 taskset's tasks with our policy (see the module docstring)."""

    name = "verifiers"
    env_config_cls = VerifiersEnvConfig
    standard = Standard(
        section="verifiers",
        title="verifiers",
        failure=EpisodeFailed,
        episode_words="a verifiers episode",
        required=("env", "an installed taskset id or a module exporting a Taskset"),
    )

    async def _open(self) -> None:
        s = self.settings
        self._loaded = load_taskset(s.env, s.args)
        first = _first_tasks(self._loaded, 1, "--verifiers.args")[0]
        self._tasks: Iterator[Any] = self._cycle()
        self._epoch = 0
        self._warned: set[str] = set()
        self._log.info(
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

    def _episode(self, loaded: LoadedTaskset, task: Any, temperature: float) -> Awaitable[Played]:
        game = EpisodeGame(
            loaded,
            self.server,
            self.tokenizer,
            self._template,
            self.settings,
            self.config.max_token_length,
            temperature,
            self._warned,
        )
        return game.play(task)

    def _group_episodes(self, item: Item) -> list[Awaitable[Played]]:
        task, temperature = item["task"], self.settings.temperature
        return [
            self._episode(self._loaded, task, temperature) for _ in range(self.config.group_size)
        ]

    def _add_to_group(self, group: GroupBuilder, episode: Played) -> None:
        ep = episode
        extra: dict[str, Any] = {}
        if self.config.include_messages:
            summary = f"score {ep.reward:g} from {ep.rewards} after {ep.turns} turn(s); {ep.note}"
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

    def _eval_episodes(self) -> list[tuple[Any, Awaitable[Played]]]:
        s = self.settings
        loaded = self._loaded
        if s.eval_args is not None:
            loaded = load_taskset(s.env, s.eval_args, flag="--verifiers.eval_args")
        tasks = _first_tasks(loaded, s.eval_tasks, "--verifiers.eval_args")
        return [(task, self._episode(loaded, task, s.eval_temperature)) for task in tasks]

    def _eval_means(self, episodes: list[Played]) -> dict[str, float]:
        return {
            "eval/mean_reward": sum(e.reward for e in episodes) / len(episodes),
            "eval/mean_turns": sum(e.turns for e in episodes) / len(episodes),
        }

    def _eval_sample(self, key: Any, episode: Played) -> dict[str, Any]:
        e = episode
        return {
            "task": key.data.idx,
            "score": e.reward,
            "rewards": e.rewards,
            "messages": e.messages,
        }

    def _drop_count_name(self, kind: str) -> str:
        return f"verifiers episode: {KINDS[kind]}"

    def _drop_reason(self, kind: str, failure: Exception) -> str:
        return f"{KINDS[kind]}: {failure}"


__all__ = ["VerifiersEnv"]
