"""The Atropos names on ``BaseEnv`` (``atropos_compat``): run-time attributes are properties onto
``env.context``, ``derived_batch_size`` follows an env file's own ``config.batch_size``, and
``add_metric``/``set_metric`` are drained by the base ``wandb_log``."""

from __future__ import annotations

import asyncio

from atroposlib.envs.atropos_compat import AtroposCompat
from atroposlib.envs.base import BaseEnv
from atroposlib.inference_clients.server_manager import APIServerConfig
from atroposlib.runtime.atropos_hooks import overrides
from atroposlib.runtime.context import RunContext
from tests.envs.example_env import AdditionEnv


class RecordingLogger:
    """A metrics logger that keeps what it was given (the wandb one needs an account)."""

    def __init__(self) -> None:
        self.logged: list[tuple[dict, int]] = []

    def log(self, metrics, step=None):
        self.logged.append((dict(metrics), step))

    def table(self, columns, rows):
        return None

    def finish(self):
        return None


def _env(tok_dir, tmp_path, **update):
    cfg, _ = AdditionEnv.config_init()
    cfg = cfg.model_copy(
        update={"tokenizer_name": str(tok_dir), "group_size": 2, "batch_size": -1, **update}
    )
    server = APIServerConfig(base_url="http://127.0.0.1:9/v1", server_type="vllm")
    return AdditionEnv(cfg, [server.model_copy(update={"health_check": False})])


def test_atropos_names_are_properties_onto_the_context(tok_dir, tmp_path):
    env = _env(tok_dir, tmp_path)
    assert isinstance(env.context, RunContext)
    env.curr_step, env.env_id, env.max_token_len = 7, 3, 128
    env.status_dict = {"queue_size": 1}
    assert (env.context.curr_step, env.context.env_id, env.context.max_token_len) == (7, 3, 128)
    assert env.context.status_dict == {"queue_size": 1}
    env.context.wandb_prepend = "addition_0"
    assert env.wandb_prepend == "addition_0"
    assert env.process_mode is False and env.n_groups_to_process is None


def test_an_env_file_that_sets_config_batch_size_itself_still_drives_the_runtime(tok_dir, tmp_path):
    env = _env(tok_dir, tmp_path)
    env.config.batch_size = 16  # what Atropos env files overriding get_server_info do
    assert env.derived_batch_size == 16


def test_groups_path_goes_to_the_context_when_the_file_exists(tok_dir, tmp_path):
    path = tmp_path / "groups.jsonl"
    path.write_text("")
    env = _env(tok_dir, tmp_path, data_path_to_save_groups=str(path))
    assert env.config.data_path_to_save_groups == str(path)
    assert env.context.groups_path == str(tmp_path / "groups_1.jsonl")
    env.jsonl_writer.close()


def test_base_wandb_log_drains_add_metric_means_keeps_gauges_and_eval_metrics(tok_dir, tmp_path):
    env = _env(tok_dir, tmp_path)
    env.metrics_logger = RecordingLogger()
    env.curr_step = 4
    env.add_metric("train/percent_correct", 1.0)
    env.add_metric("train/percent_correct", 0.0)
    env.set_metric("train/judge_failures", 2)
    env.eval_metrics.append(("eval/accuracy", 0.5))
    asyncio.run(env.wandb_log({"train/extra": 1}))
    asyncio.run(env.wandb_log())
    (first, step), (second, _) = env.metrics_logger.logged
    assert step == 4
    assert first["train/percent_correct"] == 0.5 and first["eval/accuracy"] == 0.5
    assert first["train/judge_failures"] == 2 and first["train/extra"] == 1
    assert "train/percent_correct" not in second and "eval/accuracy" not in second
    assert second["train/judge_failures"] == 2


def test_run_time_lists_and_counters_are_context_state_too(tok_dir, tmp_path):
    env = _env(tok_dir, tmp_path)
    env.backlog.append({"question": "q"})
    env.eval_metrics.append(("eval/acc", 1.0))
    env.items_sent_this_step = 2
    ctx = env.context
    assert ctx.backlog == [{"question": "q"}] and ctx.eval_metrics == [("eval/acc", 1.0)]
    assert ctx.items_sent_this_step == 2 and env.rollouts_for_wandb is ctx.rollouts_for_wandb


CONTRACT = {
    "setup",
    "get_next_item",
    "collect_trajectories",
    "collect_trajectory",
    "postprocess_histories",
    "evaluate",
    "config_init",
    "cleanup",
    "cli",
    "add_metric",
    "set_metric",
}
ATROPOS_ONLY = {
    "handle_send_to_api",
    "evaluate_log",
    "save_checkpoint",
    "load_checkpoint",
    "add_rollouts_for_wandb",
    "create_rollout_table",
    "perf_stats",
    "env_manager",
    "process_manager",
    "wandb_log",
    "server_cls",
    "get_server_info",
    "env_step_checks",
    "add_train_workers",
    "derived_batch_size",
    "curr_step",
    "env_id",
    "status_dict",
    "backlog",
}


def test_the_contract_and_the_atropos_names_are_fenced_apart():
    own = set(vars(BaseEnv))
    assert CONTRACT <= own
    assert ATROPOS_ONLY <= set(vars(AtroposCompat)) and not ATROPOS_ONLY & own


def test_the_runtime_calls_only_the_hooks_an_env_file_overrides():
    class OwnLoop(AdditionEnv):
        async def env_step_checks(self):
            await super().env_step_checks()

    env = object.__new__(OwnLoop)  # the class decides; no servers needed
    assert overrides(env, "env_step_checks") and overrides(env, "evaluate")
    assert not overrides(env, "get_server_info") and not overrides(env, "add_train_workers")
    assert not overrides(object.__new__(BaseEnv), "evaluate")


def _group(scores):
    return {
        "tokens": [[1, 2, 3]] * len(scores),
        "masks": [[-100, 2, 3]] * len(scores),
        "scores": list(scores),
    }


def _frames_in(path_part: str, coro_factory) -> list[str]:
    """Run ``coro_factory()`` and return the functions of ``path_part`` files it entered."""
    import sys

    entered: list[str] = []

    def profile(frame, event, arg):
        if event == "call" and path_part in frame.f_code.co_filename:
            entered.append(frame.f_code.co_name)

    sys.setprofile(profile)
    try:
        asyncio.run(coro_factory())
    finally:
        sys.setprofile(None)
    return entered


def test_sending_and_logging_never_cross_into_the_compat_layer_for_a_plain_env(tok_dir, tmp_path):
    """The runtime sends, keeps rollouts, logs and builds the table itself: an env that overrides
    none of Atropos's hooks is never called back for them."""
    from atroposlib.runtime.sending import send
    from atroposlib.runtime.step_metrics import log_metrics

    env = _env(tok_dir, tmp_path, group_size=2)
    env.metrics_logger = RecordingLogger()
    sent = []

    class Sink:
        async def put(self, group):
            sent.append(group)

    env.context.group_sink = Sink()

    async def run():
        await send(env, [_group([1.0, 0.0])], None)
        await log_metrics(env, {"train/extra": 1})

    entered = set(_frames_in("atroposlib/envs/", run)) - {"context", "context_of"}  # env.context
    assert entered == set()
    assert len(sent) == 1 and env.metrics_logger.logged[0][0]["train/extra"] == 1
    assert env.context.rollouts_for_wandb == []  # the table took them


def test_an_env_file_overriding_the_send_and_log_hooks_is_still_called(tok_dir, tmp_path):
    """Atropos env files that override ``handle_send_to_api``, ``add_rollouts_for_wandb``,
    ``create_rollout_table`` or ``wandb_log`` get their override called, and ``super()`` works."""
    from atroposlib.runtime.sending import send
    from atroposlib.runtime.step_metrics import log_metrics

    calls: list[str] = []

    class OwnHooks(AdditionEnv):
        async def handle_send_to_api(self, scored_data, item=None, do_send_to_api=True, **kw):
            calls.append("handle_send_to_api")
            return await super().handle_send_to_api(scored_data, item, do_send_to_api, **kw)

        async def add_rollouts_for_wandb(self, scored_data, item=None):
            calls.append("add_rollouts_for_wandb")
            await super().add_rollouts_for_wandb(scored_data, item)

        async def create_rollout_table(self, wandb_metrics):
            calls.append("create_rollout_table")
            wandb_metrics["own/table"] = len(self.rollouts_for_wandb)
            return await super().create_rollout_table(wandb_metrics)

        async def wandb_log(self, wandb_metrics=None):
            calls.append("wandb_log")
            await super().wandb_log({**(wandb_metrics or {}), "own/metric": 2})

    cfg, _ = OwnHooks.config_init()
    cfg = cfg.model_copy(update={"tokenizer_name": str(tok_dir), "group_size": 2})
    server = APIServerConfig(base_url="http://127.0.0.1:9/v1", server_type="vllm")
    env = OwnHooks(cfg, [server.model_copy(update={"health_check": False})])
    env.metrics_logger = RecordingLogger()

    async def run():
        written = await send(env, [_group([1.0, 0.0])], None, to_api=False)
        await log_metrics(env, {})
        return written

    asyncio.run(run())
    assert calls == [
        "handle_send_to_api",
        "add_rollouts_for_wandb",
        "wandb_log",
        "create_rollout_table",
    ]
    logged = env.metrics_logger.logged[0][0]
    assert logged["own/metric"] == 2 and logged["own/table"] == 1
