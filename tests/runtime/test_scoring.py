"""Scoring off the event loop: ``score_samples`` with ``--env.score_timeout``, under ``process``.

Ten items, three samples each, scored by a function that blocks for 60 s on one sample of one item
and raises on one sample of another (``tests/runtime/scorers.py``). Run through ``process`` against
a fake inference server over loopback HTTP: the other items flow on while the blocked sample waits,
the blocked sample is marked unavailable within the limit (never 0), the two other samples of its
group still train, and both failures are counted by kind. The same holds with the scorer in worker
processes (a CPU-bound spin, which a thread would not escape); there the worker is killed. Also:
``process`` cancels an item past ``--env.worker_timeout`` and retries it, counted.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any, Optional

import pytest

from atroposlib.envs.base import APIServerConfig, BaseEnv, BaseEnvConfig
from atroposlib.runtime.process import ProcessRunner
from atroposlib.testing import FakeOpenAIServer
from tests.jsonl import read_jsonl
from tests.runtime import scorers

ITEMS = 10
LIMIT = 3.0


class ScoredEnv(BaseEnv):
    """Samples three completions per item and scores them with ``score_samples``."""

    name = "scored"
    scorer: Any = staticmethod(scorers.sleepy)
    processes = False
    hang_item: Optional[int] = None

    async def setup(self) -> None:
        self.next = 0
        self.started: dict[int, float] = {}
        self.finished: dict[int, float] = {}
        self.attempts: dict[int, int] = {}

    async def get_next_item(self) -> Optional[int]:
        if self.next >= ITEMS:
            return None
        self.next += 1
        return self.next - 1

    async def collect_trajectories(self, item: int) -> tuple[Any, list[Any]]:
        self.started.setdefault(item, time.monotonic())
        self.attempts[item] = self.attempts.get(item, 0) + 1
        if item == self.hang_item:
            await asyncio.sleep(30)  # a rollout that never ends in time
        async with self.server.managed_server(tokenizer=self.tokenizer) as managed:
            await managed.completion(prompt=f"item {item}:", n=3, max_tokens=6)
            nodes = managed.get_state()["nodes"]
        samples = [(item, j) for j in range(3)]
        scores = await self.score_samples(self.scorer, samples, processes=self.processes)
        self.finished[item] = time.monotonic()
        group = self.group_builder(generation_params={"item": item})
        for node, score in zip(nodes, scores, strict=True):
            group.add_node(node, score)
        return group.build(), []


def _run(env_cls: type[ScoredEnv], tok_dir, tmp_path, **config: Any):
    settings: dict[str, Any] = {
        "group_size": 3,
        "tokenizer_name": str(tok_dir),
        "data_path_to_save_groups": str(tmp_path / "groups.jsonl"),
        "max_num_workers": ITEMS,
        "score_timeout": LIMIT,
        "use_wandb": False,
        "ensure_scores_are_not_same": False,
    }
    settings.update(config)
    with FakeOpenAIServer(tokenizer=tok_dir, responses=["a b c d e f g h"]) as fake:
        server = APIServerConfig(base_url=fake.base_url, model_name="tiny", server_type="vllm")
        env = env_cls(BaseEnvConfig(**settings), [server])
        runner = ProcessRunner(env, n_groups=settings.get("total_steps", ITEMS), progress=False)
        start = time.monotonic()
        asyncio.run(runner.run())
        wall = time.monotonic() - start
    groups = {g["generation_params"]["item"]: g for g in read_jsonl(tmp_path / "groups.jsonl")}
    return env, runner, groups, wall


def _check_blocked_run(env, runner, groups, wall):
    blocked_item, raising_item = scorers.BLOCKED[0], scorers.RAISES[0]
    took = {i: env.finished[i] - env.started[i] for i in env.finished}
    # the blocked sample was given up at the limit, not after 60 s
    assert LIMIT <= took[blocked_item] < LIMIT + 15, took
    assert wall < 45, wall
    # every other item finished without waiting for it
    others = [took[i] for i in took if i != blocked_item]
    assert len(others) == ITEMS - 1 and max(others) < took[blocked_item], took
    # all ten groups written; the blocked and the raising sample are unavailable, never 0
    assert sorted(groups) == list(range(ITEMS))
    for item, j in (scorers.BLOCKED, scorers.RAISES):
        g = groups[item]
        assert g["reward_statuses"][j] == "unavailable"
        assert [s for k, s in enumerate(g["reward_statuses"]) if k != j] == ["ok", "ok"]
        known = [float(k) for k in range(3) if k != j]
        assert g["scores"][j] == pytest.approx(sum(known) / 2)  # a placeholder, not a reward
        assert [g["scores"][k] for k in range(3) if k != j] == known
    for i in set(groups) - {blocked_item, raising_item}:
        assert "reward_statuses" not in groups[i] and "reward_status" not in groups[i]
        assert groups[i]["scores"] == [0.0, 1.0, 2.0]
    counts = env.context.scorer.failures
    assert dict(counts) == {"timeout": 1, "error: ValueError": 1}
    assert "2 sample(s) without a score (" in runner.summary()
    assert raising_item in groups


def test_a_scorer_that_blocks_does_not_stall_the_env(tok_dir, tmp_path, caplog):
    with caplog.at_level(logging.WARNING):
        env, runner, groups, wall = _run(ScoredEnv, tok_dir, tmp_path)
    _check_blocked_run(env, runner, groups, wall)
    assert env.context.scorer.abandoned_threads == 1  # the sleeping thread is still asleep
    assert caplog.text.count("a sample could not be scored (timeout)") == 1
    assert "this sample cannot be scored" in caplog.text  # the error, once, with its traceback


class ProcessScoredEnv(ScoredEnv):
    scorer = staticmethod(scorers.busy)
    processes = True


def test_cpu_bound_scorers_run_in_processes_and_are_killed_at_the_limit(tok_dir, tmp_path):
    env, runner, groups, wall = _run(ProcessScoredEnv, tok_dir, tmp_path, score_workers=2)
    _check_blocked_run(env, runner, groups, wall)
    assert env.context.scorer.abandoned_threads == 0
    assert env.context.scorer._pool is None  # closed with the run: its workers are gone


class HangingEnv(ScoredEnv):
    hang_item = 1


def test_process_honours_worker_timeout(tok_dir, tmp_path):
    env, runner, groups, _ = _run(
        HangingEnv, tok_dir, tmp_path, worker_timeout=5.0, total_steps=4, max_num_workers=2
    )
    assert 1 not in groups and len(groups) == 4  # the hanging item never made a group
    assert env.attempts[1] == 3 and runner.timeouts >= 3  # tried three times, then given up
    assert "worker timeout: cancelled after 5s" in runner.summary()
