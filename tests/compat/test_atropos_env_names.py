"""The ``BaseEnv`` names Atropos's env files use on ``self`` still work, although ``dir()`` shows
only the contract (``atroposlib/envs/surface.py``).

The lists below come from a sweep of Atropos's last commit: every ``self.NAME``, ``super().NAME``
and ``def NAME`` in its ``environments/`` (community ones included) where ``NAME`` is a name of its
``BaseEnv``, plus ``eval_metrics``, which 80 of those files assign and append to themselves. Each
name must resolve on an env object; each name reached through ``super()`` must be in the
``__dict__`` of a class of the MRO (``super()`` looks nowhere else); each name overridden must have
a base version for the override's ``super()``. ``envs/atropos_names_env.py`` then runs, as a real
subprocess, an env file that assigns, calls and overrides these names the way Atropos's
gsm8k_server does.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from atroposlib.envs.base import BaseEnv
from atroposlib.inference_clients.server_manager import APIServerConfig
from atroposlib.runtime.atropos_hooks import overrides
from atroposlib.testing import FakeOpenAIServer, tiny_tokenizer_dir
from atroposlib.type_definitions import validate_group
from tests.compat.helpers import ENVS, process_args, run_file
from tests.jsonl import read_jsonl

READ_OR_CALLED = [
    "add_rollouts_for_wandb",
    "checkpoint_dir",
    "collect_trajectories",
    "collect_trajectory",
    "completion_lengths",
    "config",
    "create_rollout_table",
    "curr_step",
    "eval_metrics",
    "evaluate",
    "evaluate_log",
    "get_next_item",
    "handle_send_to_api",
    "items_sent_this_step",
    "max_token_len",
    "name",
    "perf_stats",
    "rollouts_for_wandb",
    "server",
    "setup",
    "status_dict",
    "tokenizer",
    "wandb_log",
    "wandb_prepend",
    "workers",
]
THROUGH_SUPER = [
    "add_rollouts_for_wandb",
    "cleanup",
    "cli",
    "env_step_checks",
    "load_checkpoint",
    "save_checkpoint",
    "setup",
    "wandb_log",
]
OVERRIDDEN = [
    "add_rollouts_for_wandb",
    "add_train_workers",
    "cleanup",
    "cli",
    "collect_trajectories",
    "collect_trajectory",
    "config_init",
    "create_rollout_table",
    "env_step_checks",
    "evaluate",
    "get_next_item",
    "get_server_info",
    "load_checkpoint",
    "postprocess_histories",
    "save_checkpoint",
    "setup",
    "wandb_log",
]
# the hooks the runtime calls only where an env file overrides them ("Flows one way")
RUNTIME_CALLS_WHEN_OVERRIDDEN = [
    "add_rollouts_for_wandb",
    "add_train_workers",
    "create_rollout_table",
    "env_step_checks",
    "get_server_info",
    "handle_send_to_api",
    "wandb_log",
]


@pytest.fixture(scope="module")
def tok_dir() -> Path:
    return tiny_tokenizer_dir()


def _names_env_class() -> type[BaseEnv]:
    path = ENVS / "atropos_names_env.py"
    spec = importlib.util.spec_from_file_location("atropos_names_env", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.AtroposNamesEnv


def _env(cls: type[BaseEnv], tok_dir: Path) -> BaseEnv:
    cfg, _ = cls.config_init()
    cfg = cfg.model_copy(update={"tokenizer_name": str(tok_dir)})
    server = APIServerConfig(base_url="http://127.0.0.1:9/v1", server_type="vllm")
    return cls(cfg, [server.model_copy(update={"health_check": False})])


class PlainEnv(BaseEnv):
    async def get_next_item(self):
        return None


def test_every_name_an_atropos_env_file_reads_or_calls_resolves(tok_dir):
    env = _env(PlainEnv, tok_dir)
    missing = [name for name in READ_OR_CALLED if not hasattr(env, name)]
    assert missing == []


@pytest.mark.parametrize("name", THROUGH_SUPER)
def test_names_reached_through_super_are_in_a_class_dict_of_the_mro(name):
    holders = [klass for klass in BaseEnv.__mro__ if name in vars(klass)]
    assert holders, f"super().{name} finds nothing"
    assert callable(getattr(BaseEnv, name))


@pytest.mark.parametrize("name", OVERRIDDEN)
def test_names_env_files_override_have_a_base_version(name):
    assert callable(getattr(BaseEnv, name))


@pytest.mark.parametrize("name", RUNTIME_CALLS_WHEN_OVERRIDDEN)
def test_the_runtime_sees_an_override_of_a_hidden_hook(name):
    subclass = type("Overrides", (PlainEnv,), {name: lambda self, *a, **kw: None})
    assert overrides(object.__new__(subclass), name)
    assert not overrides(object.__new__(PlainEnv), name)


def test_an_atropos_style_file_lists_its_overrides_and_attributes_but_not_the_rest(tok_dir):
    env = _env(_names_env_class(), tok_dir)
    shown = set(dir(env))
    own = {"wandb_log", "save_checkpoint", "load_checkpoint", "create_rollout_table"}
    assert own | {"add_rollouts_for_wandb", "percent_correct_buffer"} <= shown
    assert not {"handle_send_to_api", "curr_step", "eval_metrics", "workers"} & shown
    # what __init__ assigned went through the context descriptors, not into the object
    assert env.eval_metrics is env.context.eval_metrics == []
    assert env.rollouts_for_wandb is env.context.rollouts_for_wandb
    assert "eval_metrics" not in vars(env) and "completion_lengths" not in vars(env)


def test_checkpoint_overrides_round_trip_through_super(tok_dir, tmp_path, monkeypatch):
    log = tmp_path / "hooks.jsonl"
    monkeypatch.setenv("HOOK_LOG", str(log))
    cls = _names_env_class()
    saver = _env(cls, tok_dir)
    saver.checkpoint_dir, saver.curr_step, saver.iter = str(tmp_path), 3, 5
    saver.save_checkpoint(3)
    saved = tmp_path / "env_checkpoints" / "atropos_names_compat" / "step-3.json"
    assert json.loads(saved.read_text()) == {"iter": 5}
    loader = _env(cls, tok_dir)
    loader.checkpoint_dir, loader.curr_step = str(tmp_path), 3
    loader.load_checkpoint()
    assert loader.iter == 5
    notes = read_jsonl(log)
    assert notes == [{"hook": "save_checkpoint", "step": 3}, {"hook": "load_checkpoint", "iter": 5}]


def _notes(path: Path) -> list[dict]:
    return read_jsonl(path) if path.exists() else []


def test_the_file_runs_through_process_with_its_overrides_called(tok_dir, tmp_path):
    out, log = tmp_path / "g.jsonl", tmp_path / "hooks.jsonl"
    replies = ["It is 2", "no idea"]
    with FakeOpenAIServer(
        tokenizer=tok_dir, responder=lambda p, b: replies[b["choice_index"] % 2]
    ) as fake:
        r = run_file(
            "atropos_names_env.py",
            *process_args(fake.base_url, tok_dir, out),
            cwd=tmp_path,
            HOOK_LOG=str(log),
        )
    assert r.returncode == 0, (r.stdout + r.stderr)[-3000:]
    groups = read_jsonl(out)
    assert len(groups) == 3
    for g in groups:
        validate_group(g)
    notes = _notes(log)
    hooks = [n["hook"] for n in notes]
    assert hooks[0] == "cli" and hooks.count("add_rollouts_for_wandb") == 3
    logs = [n for n in notes if n["hook"] == "wandb_log"]
    assert [n["step"] for n in logs] == [1, 2, 3]  # process logs after each group
    assert all(n["keys"] == ["train/percent_correct"] for n in logs)
    # ``self.completion_lengths`` is the context's list: the env's 2 appends and the runtime's 2 (it
    # records each sent sequence), emptied by every log; on the object it would read 2, 4, 6
    assert [n["lengths"] for n in logs] == [4, 4, 4]
    # super().wandb_log went on to the env's own create_rollout_table
    assert hooks.count("create_rollout_table") == len(logs)


def test_the_file_evaluates_through_evaluate_log(tok_dir, tmp_path):
    log, evals = tmp_path / "hooks.jsonl", tmp_path / "evals"
    with FakeOpenAIServer(tokenizer=tok_dir, responder=lambda p, b: "It is 2 or 4") as fake:
        r = run_file(
            "atropos_names_env.py",
            "evaluate",
            "--openai.base_url",
            fake.base_url,
            "--env.tokenizer_name",
            str(tok_dir),
            "--env.data_dir_to_save_evals",
            str(evals),
            cwd=tmp_path,
            HOOK_LOG=str(log),
        )
    assert r.returncode == 0, (r.stdout + r.stderr)[-3000:]
    result = json.loads((evals / "metrics.json").read_text())
    assert result["results"]["all"]["eval/percent_correct"] == pytest.approx(2 / 3)
    assert len(read_jsonl(evals / "samples.jsonl")) == 3
    assert [n["hook"] for n in _notes(log)] == ["cli", "evaluate"]
