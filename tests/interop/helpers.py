"""Helpers of the interop tests: where a sequence is trained, and a two-step run of our GRPO trainer fed
by an interop env's ``serve`` through a real ``run-api``."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from atroposlib.type_definitions import MASK_IGNORE
from tests.jsonl import read_jsonl

REPO = Path(__file__).resolve().parents[2]


def trained_runs(masks: list[int]) -> list[tuple[int, int]]:
    """[start, end) of every stretch of trained (unmasked) positions."""
    runs, start = [], None
    for i, m in enumerate([*masks, MASK_IGNORE]):
        if m != MASK_IGNORE and start is None:
            start = i
        elif m == MASK_IGNORE and start is not None:
            runs.append((start, i))
            start = None
    return runs


def train_two_steps(
    env_flags: list[str], model: Path, api_url: str, engine_url: str, tmp_path: Path
) -> list[dict[str, Any]]:
    """Run the trainer (2 steps of 8 sequences, tiny model, CPU) and ``env_flags`` (``-m <module> serve
    --<env>.*``, to which the shared ``--env.*``/``--openai.*`` flags are added) side by side; both must
    exit 0. Returns the trainer's metrics rows."""
    save = tmp_path / "trainer"
    path = os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p)
    env_vars = dict(os.environ, PYTHONPATH=path, OMP_NUM_THREADS="1")
    trainer_argv = [
        sys.executable, "-m", "example_trainer.grpo",
        "--model-name", str(model), "--api-url", api_url, "--save-path", str(save),
        "--training-steps", "2", "--batch-size", "8", "--seq-len", "256",
        "--torch-threads", "1", "--device", "cpu", "--weight-refresh", "none",
        "--batch-poll-interval", "0.05", "--batch-wait-timeout", "120",
    ]  # fmt: skip
    env_argv = [
        sys.executable, *env_flags,
        "--env.group_size", "4", "--env.total_steps", "2", "--env.max_token_length", "256",
        "--env.ensure_scores_are_not_same", "false", "--env.spool_dir", str(tmp_path / "spool"),
        "--env.tokenizer_name", str(model), "--env.rollout_server_url", api_url,
        "--openai.base_url", engine_url + "/v1", "--openai.model_name", "tiny",
    ]  # fmt: skip
    logs = {name: open(tmp_path / f"{name}.log", "wb") for name in ("trainer", "env")}
    procs = [
        subprocess.Popen(argv, stdout=logs[name], stderr=subprocess.STDOUT, env=env_vars, cwd=cwd)
        for name, argv, cwd in (("trainer", trainer_argv, REPO), ("env", env_argv, tmp_path))
    ]
    try:
        for name, proc, limit in zip(logs, procs, (240, 60), strict=True):
            assert proc.wait(limit) == 0, (tmp_path / f"{name}.log").read_text()[-3000:]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait(10)
        for f in logs.values():
            f.close()
    assert "Traceback" not in (tmp_path / "env.log").read_text()
    return read_jsonl(save / "metrics.jsonl")
