"""``serve`` of a verifiers v1 taskset (the multi-turn one) feeds our GRPO trainer two steps through a
real ``run-api``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip(
    "verifiers.v1", reason="verifiers is not installed (scripts/setup_verifiers.sh installs it)"
)

REPO = Path(__file__).resolve().parents[2]


def test_serve_feeds_our_trainer_two_steps_through_run_api(
    tiny_engine, tiny_model_dir: Path, run_api, tmp_path: Path
):
    api = run_api("--store", "memory")
    save = tmp_path / "trainer"
    path = os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p)
    env_vars = dict(os.environ, PYTHONPATH=path, OMP_NUM_THREADS="1")
    trainer_argv = [
        sys.executable, "-m", "example_trainer.grpo",
        "--model-name", str(tiny_model_dir), "--api-url", api.url, "--save-path", str(save),
        "--training-steps", "2", "--batch-size", "8", "--seq-len", "256",
        "--torch-threads", "1", "--device", "cpu", "--weight-refresh", "none",
        "--batch-poll-interval", "0.05", "--batch-wait-timeout", "120",
    ]  # fmt: skip
    env_argv = [
        sys.executable, "-m", "atroposlib.interop.verifiers", "serve",
        "--verifiers.env", "tests.interop.vf_tasks.count_game",
        "--verifiers.args", '{"rounds": 2}',
        "--verifiers.max_tokens_per_turn", "6",
        "--env.group_size", "4", "--env.total_steps", "2", "--env.max_token_length", "256",
        "--env.ensure_scores_are_not_same", "false", "--env.spool_dir", str(tmp_path / "spool"),
        "--env.tokenizer_name", str(tiny_model_dir), "--env.rollout_server_url", api.url,
        "--openai.base_url", tiny_engine.url + "/v1", "--openai.model_name", "tiny",
    ]  # fmt: skip
    logs = {name: open(tmp_path / f"{name}.log", "wb") for name in ("trainer", "env")}
    trainer = subprocess.Popen(
        trainer_argv, stdout=logs["trainer"], stderr=subprocess.STDOUT, env=env_vars, cwd=REPO
    )
    env = subprocess.Popen(
        env_argv, stdout=logs["env"], stderr=subprocess.STDOUT, env=env_vars, cwd=REPO
    )
    try:
        assert trainer.wait(240) == 0, (tmp_path / "trainer.log").read_text()[-3000:]
        assert env.wait(60) == 0, (tmp_path / "env.log").read_text()[-3000:]
    finally:
        for p in (trainer, env):
            if p.poll() is None:
                p.kill()
                p.wait(10)
        for f in logs.values():
            f.close()
    rows = [json.loads(line) for line in (save / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [1, 2]
    assert all(r["trained_tokens"] > 0 and r["reward_mean"] is not None for r in rows)
    assert "Traceback" not in (tmp_path / "env.log").read_text()
