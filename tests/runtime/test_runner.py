"""ServeRunner's scheduling pieces, in-process: timeouts, hook errors, stamping, targets, evals, checkpoints."""

from __future__ import annotations

import asyncio
import json
import logging

import pytest

from atroposlib.inference_clients.server_manager import APIServerConfig
from atroposlib.runtime.config import EvalHandlingEnum
from atroposlib.runtime.runner import ServeRunner, serve
from atroposlib.runtime.spool import SpoolSink
from tests.envs.example_env import AdditionEnv

GROUP = {"tokens": [[1, 2], [1, 3]], "masks": [[-100, 2], [-100, 3]], "scores": [1.0, 0.0]}


@pytest.fixture
def env(tok_dir, tmp_path):
    cfg, _ = AdditionEnv.config_init()
    cfg = cfg.model_copy(
        update={
            "tokenizer_name": str(tok_dir),
            "group_size": 2,
            "spool_dir": str(tmp_path / "spool"),
            "batch_size": 8,
            "max_num_workers": 4,
        }
    )
    e = AdditionEnv(
        cfg,
        [APIServerConfig(base_url="http://127.0.0.1:9/v1", server_type="vllm", health_check=False)],
    )
    e.checkpoint_dir = str(tmp_path / "ckpt")
    e.wandb_prepend = "addition_test_0"
    return e


def test_timed_out_worker_puts_its_item_back_then_gives_up(env):
    async def forever(item):
        await asyncio.sleep(3600)

    env.collect_trajectories = forever
    env.config.worker_timeout = 0.01

    async def go():
        runner = ServeRunner(env)
        item = {"question": "q", "answer": "1"}
        for _ in range(3):
            runner._start(env.backlog.pop() if env.backlog else item)
            task = next(iter(runner.running.values()))["task"]
            await asyncio.sleep(0.05)
            runner._reap_timeouts()
            await asyncio.sleep(0)
            assert task.cancelled() or task.done()
        return runner, item

    runner, item = asyncio.run(go())
    assert runner.counts["timeouts"] == 3 and not runner.running
    assert env.backlog == []  # back twice, then given up after MAX_ITEM_ATTEMPTS
    assert runner.attempts == {}  # a given-up item is not counted any more


def test_an_item_that_times_out_then_finishes_leaves_no_retry_count(env):
    """Retries were keyed by id(item) and never cleared: the dict grew for the whole run, and a
    new item that got a finished one's id inherited its timeouts."""
    calls = []

    async def slow_once(item):
        calls.append(item)
        if len(calls) == 1:
            await asyncio.sleep(3600)
        return None, []

    env.collect_trajectories = slow_once
    env.config.worker_timeout = 0.05

    async def go():
        runner = ServeRunner(env)
        runner._start({"question": "q"})
        await asyncio.sleep(0.1)
        runner._reap_timeouts()
        assert len(runner.attempts) == 1 and len(env.backlog) == 1
        runner._start(env.backlog.pop())
        await asyncio.gather(*[e["task"] for e in list(runner.running.values())])
        await asyncio.sleep(0)
        return runner

    runner = asyncio.run(go())
    assert len(calls) == 2 and runner.counts["timeouts"] == 1 and runner.attempts == {}


def test_serve_refuses_group_size_1_with_equal_score_filtering(env):
    """Every group of one has 'all equal' scores: serve used to drop 100% of them (at INFO) and
    spin; now it is one clear error before anything starts."""
    from atroposlib.errors import ConfigError

    env.config.group_size = 1
    env.config.ensure_scores_are_not_same = True  # the filter asked for (the default is off)
    with pytest.raises(ConfigError, match="group_size 1 with ensure_scores_are_not_same"):
        asyncio.run(asyncio.wait_for(serve(env), timeout=10))
    env.config.ensure_scores_are_not_same = False  # a reward model's single samples: allowed
    runner = ServeRunner(env)
    assert runner.cfg.group_size == 1


def test_hook_exception_is_logged_once_with_traceback_then_counted(env, caplog):
    async def boom(item):
        raise ValueError("boom in collect")

    env.collect_trajectories = boom

    async def go():
        runner = ServeRunner(env)
        for _ in range(3):
            runner._start({"question": "q"})
        await asyncio.gather(*[e["task"] for e in list(runner.running.values())])
        return runner

    with caplog.at_level(logging.WARNING):
        runner = asyncio.run(go())
    assert runner.counts["hook_errors"] == 3
    logged = [r for r in caplog.records if "boom in collect" in r.getMessage()]
    assert len(logged) == 1 and logged[0].exc_info  # the first one, with its traceback
    (cause,) = runner.failures.counts
    assert cause.startswith("hook error: ValueError: boom in collect")
    assert runner.failures.counts[cause] == 3 and runner.failures.delay() > 0  # backing off


def test_group_is_stamped_with_the_step_its_item_started_under(env, tmp_path):
    async def collect(item):
        await asyncio.sleep(0.05)
        return dict(GROUP), []

    env.collect_trajectories = collect
    env.curr_step = 7
    env.env_id = 2

    async def go():
        runner = ServeRunner(env)
        env.group_sink = SpoolSink(runner.spool, runner.wake)
        runner._start({"question": "q"})
        env.curr_step = 9  # the trainer moved on while the item was generating
        await asyncio.gather(*[e["task"] for e in list(runner.running.values())])
        return runner

    runner = asyncio.run(go())
    sent = runner.spool.peek()[1]
    assert sent["policy_version"] == 7 and sent["env_id"] == 2 and sent["group_id"]


def test_target_in_flight_follows_queue_evals_and_min_allocation(env):
    async def go():
        runner = ServeRunner(env)
        st = {
            "current_step": 0,
            "queue_size": 0,
            "unallocated_fraction": 1.0,
            "self_queue_size": 0,
            "max_group_size": 2,
            "env_weight": 1.0,
        }
        env.status_dict = dict(st)
        free = runner._target_in_flight()  # min(max_num_workers 4, 3 batches * 8 / 2 - 0 = 12)
        env.status_dict = dict(st, queue_size=12)
        full = runner._target_in_flight()
        env.status_dict = dict(st, queue_size=10)
        almost = runner._target_in_flight()
        runner.hooks.eval_task = asyncio.create_task(asyncio.sleep(10))
        env.status_dict = dict(st)
        env.config.eval_handling = EvalHandlingEnum.STOP_TRAIN
        stopped = runner._target_in_flight()
        env.config.eval_handling = EvalHandlingEnum.LIMIT_TRAIN
        limited = runner._target_in_flight()
        runner.hooks.eval_task.cancel()
        runner.hooks.eval_task = None
        env.config.min_batch_allocation = 0.5
        env.status_dict = dict(st, queue_size=12, unallocated_fraction=0.5)
        reserved = runner._target_in_flight()
        env.config.min_batch_allocation = None
        # the API's staleness bound allows 1 batch held ahead: 1 * 8 / 2 = 4 groups, less the queue
        env.status_dict = dict(st, queue_size=2, max_batches_offpolicy=1, max_staleness=2)
        bounded = runner._target_in_flight()
        assert runner._offpolicy_batches() == 1
        env.status_dict = dict(st, queue_size=2, max_batches_offpolicy=5, max_staleness=6)
        assert runner._offpolicy_batches() == 3  # the env's own budget when it is the smaller
        assert bounded == 2
        return free, full, almost, stopped, limited, reserved

    free, full, almost, stopped, limited, reserved = asyncio.run(go())
    assert (free, full, almost, stopped, limited) == (4, 0, 2, 0, 2)
    assert (
        reserved == 4
    )  # min_batch_allocation keeps this env fed although the shared queue is full


def test_on_policy_waits_while_the_trainer_holds_a_batch(env):
    st = {"current_step": 3, "queue_size": 0, "max_group_size": 2}

    async def go():
        runner = ServeRunner(env)
        targets = []
        for on_policy, training in ((False, True), (True, True), (True, False)):
            env.config.on_policy = on_policy
            env.status_dict = dict(st, batch_in_training=training)
            targets.append(runner._target_in_flight())
        env.status_dict = dict(st)  # an API that does not report it (Atropos's): no effect
        targets.append(runner._target_in_flight())
        return targets

    assert asyncio.run(go()) == [4, 0, 4, 4]


def test_step_checks_run_scheduled_evals_and_checkpoints(env, tmp_path):
    env.config.steps_per_eval = 2
    env.checkpoint_interval = 2
    calls = []

    async def evaluate(*a, **k):
        calls.append(env.curr_step)

    env.evaluate = evaluate
    env.iter_state = 5
    env.save_checkpoint = lambda step, data=None: AdditionEnv.save_checkpoint(
        env, step, {"iter_state": 5}
    )

    async def go():
        runner = ServeRunner(env)
        await runner._step_checks(1)
        assert runner.hooks.eval_task is None
        await runner._step_checks(2)
        await runner.hooks.eval_task
        await runner._step_checks(3)
        return runner

    asyncio.run(go())
    assert calls == [2] and env.curr_step == 3
    ckpt = tmp_path / "ckpt" / "env_checkpoints" / "addition_test_0" / "step-2.json"
    assert json.loads(ckpt.read_text()) == {"iter_state": 5}
    env.iter_state = 0
    env.curr_step = 2
    env.load_checkpoint()
    assert env.iter_state == 5


def test_item_goes_back_when_no_inference_server_answers(env):
    from atroposlib.errors import InferenceUnavailable

    async def unavailable(item):
        raise InferenceUnavailable("all servers down")

    env.collect_trajectories = unavailable

    async def go():
        runner = ServeRunner(env)
        runner._start({"question": "q"})
        await asyncio.gather(*[e["task"] for e in list(runner.running.values())])
        return runner

    runner = asyncio.run(go())
    assert env.backlog == [{"question": "q"}]
    assert runner.counts["inference_unavailable"] == 1 and runner.counts["hook_errors"] == 0


def test_a_registration_the_api_refuses_is_one_config_error(env, run_api):
    """Shares adding up to more than 1 are refused (422): the env stops with that line instead of
    retrying forever."""
    from atroposlib.api.client import AsyncTrajectoryClient, TrajectoryClient
    from atroposlib.errors import ConfigError
    from atroposlib.runtime.registration import register
    from atroposlib.type_definitions import RegisterEnv, Registration

    api = run_api("--store", "memory")
    with TrajectoryClient(api.url) as trainer:
        trainer.register(Registration(batch_size=8, max_token_len=64))
        trainer.get_batch()
        trainer.register_env(
            RegisterEnv(
                max_token_length=64, desired_name="a", group_size=2, min_batch_allocation=0.7
            )
        )
    env.config.rollout_server_url = api.url
    env.config.min_batch_allocation = 0.4

    async def go():
        client = AsyncTrajectoryClient(api.url, retries=1)
        try:
            await register(env, client, asyncio.Event())
        finally:
            await client.aclose()

    with pytest.raises(ConfigError, match=r"refused this env's registration: .*add up to 1\.1"):
        asyncio.run(asyncio.wait_for(go(), timeout=60))


def test_on_policy_reads_the_batch_the_trainer_holds_from_a_real_api(env, run_api):
    """Against a real run-api: no batch out -> False; delivered and unacknowledged -> True; acked ->
    False. An API without /status (Atropos's) turns the gate off instead of blocking the env."""
    from atroposlib.api.client import TrajectoryClient
    from atroposlib.type_definitions import Registration

    api = run_api("--store", "memory")
    env.config.rollout_server_url = api.url
    with TrajectoryClient(api.url) as trainer:
        trainer.register(Registration(batch_size=2, max_token_len=64, num_steps=5))

        async def in_training() -> bool:
            runner = ServeRunner(env)
            try:
                return await runner._batch_in_training()
            finally:
                await runner.client.aclose()

        assert asyncio.run(in_training()) is False
        trainer.post_scored_data(dict(GROUP, group_id="g1"))
        batch = trainer.get_batch()
        assert batch.batch and batch.batch_id
        assert asyncio.run(in_training()) is True
        trainer.ack_batch(batch.batch_id)
        assert asyncio.run(in_training()) is False

    env.config.rollout_server_url = "http://127.0.0.1:9"  # nothing listens: unreachable, not absent

    async def unreachable() -> bool:
        runner = ServeRunner(env)
        try:
            return await runner._batch_in_training()
        finally:
            await runner.client.aclose()

    assert asyncio.run(unreachable()) is True
