"""The one back-off rule of the interop drivers (``atroposlib.interop.driver``), pinned for both the
OpenEnv and the verifiers driver: the same failed groups give the same waits and the same counts.

Each driver's one place that plays an episode (``_episode``) is replaced by a script of outcomes, so
the test needs neither an OpenEnv server nor verifiers; ``asyncio.sleep`` is recorded, not slept."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from atroposlib.interop.driver import FREE_FAILED_GROUPS, InteropEnv, failed_group_delay
from atroposlib.interop.openenv import OpenEnvEnv
from atroposlib.interop.openenv.client import EpisodeError
from atroposlib.interop.openenv.episode import Episode
from atroposlib.interop.verifiers import VerifiersEnv
from atroposlib.interop.verifiers.rollout import EpisodeFailed, Played
from atroposlib.runtime.config_loader import load_config
from atroposlib.testing.tiny_tokenizer import tiny_tokenizer_dir

SEQUENCE = {"tokens": [5, 6, 7], "masks": [-100, 6, 7], "logprobs": [1.0, -0.5, -0.5]}


def test_ten_failed_groups_are_free_then_the_wait_doubles_up_to_30_s():
    assert FREE_FAILED_GROUPS == 10
    waits = [failed_group_delay(n) for n in range(1, 19)]
    assert waits == [0.0] * 10 + [0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 30.0, 30.0]


def _openenv() -> tuple[InteropEnv[Any, Any], Any, Any]:
    env = _load(OpenEnvEnv, "--openenv.url", "http://127.0.0.1:9")
    good = Episode(messages=[{"role": "user", "content": "hi"}], rewards=[1.0], **SEQUENCE)
    return env, good, EpisodeError("timeout", "no answer in time")


def _verifiers() -> tuple[InteropEnv[Any, Any], Any, Any]:
    env = _load(VerifiersEnv, "--verifiers.env", "some.taskset")
    env._loaded = None  # what setup would load; the scripted episodes do not read it
    good = Played(messages=[{"role": "user", "content": "hi"}], reward=1.0, **SEQUENCE)
    return env, good, EpisodeFailed("rubric", "ZeroDivisionError: the grader divided by zero")


def _load(cls: Any, *flags: str) -> Any:
    loaded = load_config(
        cls,
        "process",
        [
            *flags,
            "--env.tokenizer_name",
            str(tiny_tokenizer_dir()),
            "--openai.base_url",
            "http://127.0.0.1:9/v1",
            "--env.group_size",
            "2",
            "--env.data_path_to_save_groups",
            "none",
        ],
    )
    return cls(loaded.env, loaded.servers)


def _run(make: Any, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """Play a script of groups (all failed, partly failed, good) through ``collect_trajectories``;
    what was sent, waited and counted."""
    env, good, failure = make()
    outcomes: list[Any] = []

    async def scripted(*args: Any) -> Any:
        outcome = outcomes.pop(0)
        if isinstance(outcome, Exception):
            raise outcome
        return outcome

    env._episode = scripted
    waits: list[float] = []

    async def no_sleep(seconds: float) -> None:
        waits.append(seconds)

    monkeypatch.setattr(asyncio, "sleep", no_sleep)
    script = (
        [[failure, failure]] * (FREE_FAILED_GROUPS + 2)  # 10 free, then 0.5 s and 1 s
        + [[good, failure]]  # partly dropped: neither counts nor resets
        + [[failure, failure]]  # the 13th failed in a row: 2 s
        + [[good, good]]  # sent: the count starts over
        + [[failure, failure]]  # the first failed group in a row again: free
    )
    sent, waits_after = [], []
    for group in script:
        outcomes.extend(group)
        item = {"seed": 3, "task": "t"}
        built, backlog = asyncio.run(env.collect_trajectories(item))
        assert backlog == []
        sent.append(built is not None)
        waits_after.append(list(waits))
        waits.clear()
    return {
        "sent": sent,
        "waits": waits_after,
        "dropped": sum(env.context.drop_counts.values()),
        "in_a_row": env._failed_groups_in_a_row,
    }


@pytest.mark.parametrize("make", [_openenv, _verifiers], ids=["openenv", "verifiers"])
def test_failed_groups_back_off_by_the_one_rule(make, monkeypatch):
    got = _run(make, monkeypatch)
    free = [[]] * FREE_FAILED_GROUPS
    assert got["waits"] == free + [[0.5], [1.0], [], [2.0], [], []]
    assert got["sent"] == [False] * 14 + [True, False]
    assert got["dropped"] == 2 * 12 + 1 + 2 + 2
    assert got["in_a_row"] == 1


def test_both_drivers_back_off_alike_for_the_same_failures(monkeypatch):
    assert _run(_openenv, monkeypatch) == _run(_verifiers, monkeypatch)
