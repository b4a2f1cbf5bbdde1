"""The env-runtime seam: run-time values live in ``env.context`` (never written into the loaded
config), Atropos's attribute names are properties onto it, and ``add_metric``/``set_metric`` are
drained by the base ``wandb_log``."""

from __future__ import annotations

import ast
import asyncio
from pathlib import Path
from types import SimpleNamespace

import pytest

from atroposlib.envs.atropos_hooks import apply_info
from atroposlib.envs.context import RunContext
from atroposlib.envs.registration import _apply
from atroposlib.envs.server_handling.server_manager import APIServerConfig
from atroposlib.errors import ConfigError
from atroposlib.type_definitions import RegisterEnv
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


def test_info_and_registration_write_the_context_not_the_config(tok_dir, tmp_path):
    env = _env(tok_dir, tmp_path, total_steps=-1)
    before = env.config.model_dump()
    apply_info(env, 8, 256)
    assert env.context.batch_size == 8 and env.max_token_len == 256
    assert env.derived_batch_size == 8
    req = RegisterEnv(max_token_length=256, desired_name="addition", weight=1.0, group_size=2)
    resp = SimpleNamespace(
        env_id=2,
        wandb_name="addition_2",
        starting_step=0,
        checkpoint_dir=str(tmp_path),
        checkpoint_interval=5,
        num_steps=11,
    )
    _apply(SimpleNamespace(env=env, cfg=env.config), req, resp)
    assert env.context.effective_total_steps(env.config) == 11
    assert (env.env_id, env.checkpoint_interval) == (2, 5)
    assert env.config.model_dump() == before  # the loaded config is what the user asked for
    with pytest.raises(ConfigError, match="must not exceed the trainer's batch_size \\(1\\)"):
        apply_info(env, 1, -1)


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


RUNTIME_MODULES = [
    "base.py",
    "runner.py",
    "sending.py",
    "process.py",
    "evaluation.py",
    "registration.py",
    "step_hooks.py",
    "progress.py",
    "backpressure.py",
    "failures.py",
    "atropos_hooks.py",
]


def _config_writes(source: str) -> list[str]:
    """``cfg.X = ...`` / ``config.X = ...`` / ``<anything>.config.X = ...`` assignments."""
    out = []
    for node in ast.walk(ast.parse(source)):
        targets = (
            node.targets
            if isinstance(node, ast.Assign)
            else [node.target]
            if isinstance(node, (ast.AugAssign, ast.AnnAssign))
            else []
        )
        for t in targets:
            if not isinstance(t, ast.Attribute):
                continue
            owner = t.value
            if (isinstance(owner, ast.Name) and owner.id in ("cfg", "config")) or (
                isinstance(owner, ast.Attribute) and owner.attr in ("cfg", "config")
            ):
                out.append(f"line {t.lineno}: {ast.unparse(t)}")
    return out


def test_the_runtime_never_writes_into_the_loaded_config():
    assert _config_writes("self.config.batch_size = 1\ncfg.total_steps += 2\n")  # detector works
    root = Path(__file__).resolve().parents[2] / "atroposlib" / "envs"
    bad = {m: _config_writes((root / m).read_text()) for m in RUNTIME_MODULES}
    assert not {m: w for m, w in bad.items() if w}
