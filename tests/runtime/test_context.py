"""The env-runtime seam: run-time values live in ``env.context``, never in the loaded config and
never on the env object itself."""

from __future__ import annotations

import ast
from pathlib import Path
from types import SimpleNamespace

import pytest

from atroposlib.errors import ConfigError
from atroposlib.inference_clients.server_manager import APIServerConfig
from atroposlib.runtime.atropos_hooks import apply_info
from atroposlib.runtime.registration import apply_registration
from atroposlib.type_definitions import RegisterEnv
from tests.envs.example_env import AdditionEnv


def _env(tok_dir, tmp_path, **update):
    cfg, _ = AdditionEnv.config_init()
    cfg = cfg.model_copy(
        update={"tokenizer_name": str(tok_dir), "group_size": 2, "batch_size": -1, **update}
    )
    server = APIServerConfig(base_url="http://127.0.0.1:9/v1", server_type="vllm")
    return AdditionEnv(cfg, [server.model_copy(update={"health_check": False})])


def test_info_and_registration_write_the_context_not_the_config(tok_dir, tmp_path):
    env = _env(tok_dir, tmp_path, total_steps=-1)
    before = env.config.model_dump()
    apply_info(env.context, env.config, 8, 256)
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
    apply_registration(env, req, resp)
    assert env.context.effective_total_steps(env.config) == 11
    assert (env.env_id, env.checkpoint_interval) == (2, 5)
    assert env.config.model_dump() == before  # the loaded config is what the user asked for
    with pytest.raises(ConfigError, match="must not exceed the trainer's batch_size \\(1\\)"):
        apply_info(env.context, env.config, 1, -1)


PKG = Path(__file__).resolve().parents[2] / "atroposlib"
# the runtime, and the env-side code that delegates to it
RUNTIME_FILES = sorted((PKG / "runtime").glob("*.py")) + [
    PKG / "envs" / "base.py",
    PKG / "envs" / "atropos_compat.py",
]


def _assignment_targets(source: str) -> list[ast.expr]:
    out: list[ast.expr] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Assign):
            for t in node.targets:
                out.extend(t.elts if isinstance(t, ast.Tuple) else [t])
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
            out.append(node.target)
    return out


def _config_writes(source: str) -> list[str]:
    """``cfg.X = ...`` / ``config.X = ...`` / ``<anything>.config.X = ...`` assignments."""
    out = []
    for t in _assignment_targets(source):
        if not isinstance(t, ast.Attribute):
            continue
        owner = t.value
        if (isinstance(owner, ast.Name) and owner.id in ("cfg", "config")) or (
            isinstance(owner, ast.Attribute) and owner.attr in ("cfg", "config")
        ):
            out.append(f"line {t.lineno}: {ast.unparse(t)}")
    return out


def _env_writes(source: str) -> list[str]:
    """``env.X = ...`` / ``<anything>.env.X = ...`` assignments and ``setattr(env, ...)`` calls."""
    out = []
    for t in _assignment_targets(source):
        if not isinstance(t, ast.Attribute):
            continue
        owner = t.value
        if (isinstance(owner, ast.Name) and owner.id == "env") or (
            isinstance(owner, ast.Attribute) and owner.attr == "env"
        ):
            out.append(f"line {t.lineno}: {ast.unparse(t)}")
    for node in ast.walk(ast.parse(source)):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id == "setattr"
            and node.args
            and ast.unparse(node.args[0]).split(".")[-1] == "env"
        ):
            out.append(f"line {node.lineno}: {ast.unparse(node)}")
    return out


def test_the_runtime_never_writes_into_the_loaded_config():
    assert _config_writes("self.config.batch_size = 1\ncfg.total_steps += 2\n")  # detector works
    bad = {f.name: _config_writes(f.read_text()) for f in RUNTIME_FILES}
    assert not {m: w for m, w in bad.items() if w}


def test_the_runtime_writes_run_time_state_only_into_the_context():
    probe = "env.curr_step = 1\nself.env.status_dict, x = {}, 1\nsetattr(runner.env, 'a', 1)\n"
    assert len(_env_writes(probe)) == 3  # the detector works
    files = sorted((PKG / "runtime").glob("*.py"))
    assert len(files) > 15
    bad = {f.name: _env_writes(f.read_text()) for f in files}
    assert not {m: w for m, w in bad.items() if w}


def test_gauges_read_as_one_line_of_name_value_words():
    from atroposlib.runtime.context import MetricBuffers

    metrics = MetricBuffers()
    assert metrics.gauges_text() == ""  # nothing set: serve writes no counters line
    metrics.gauges["agent/outcome/crashed"] = 1
    metrics.gauges["agent/outcome/answered"] = 633
    metrics.add("train/reward", 0.5)  # a mean, not a counter: not in the line
    assert metrics.gauges_text() == "agent/outcome/answered=633 agent/outcome/crashed=1"
