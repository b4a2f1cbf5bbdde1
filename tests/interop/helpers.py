"""Helpers of the interop tests: where a sequence is trained, and a two-step run of our GRPO trainer fed
by an interop env's ``serve`` through a real ``run-api``."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

from atroposlib.type_definitions import MASK_IGNORE
from tests.jsonl import read_jsonl
from tests.trainer._trainer_helpers import child_env, start, trainer_cmd


def trained_runs(masks: list[int]) -> list[tuple[int, int]]:
    """[start, end) of every stretch of trained (unmasked) positions."""
    runs, begin = [], None
    for i, m in enumerate([*masks, MASK_IGNORE]):
        if m != MASK_IGNORE and begin is None:
            begin = i
        elif m == MASK_IGNORE and begin is not None:
            runs.append((begin, i))
            begin = None
    return runs


def train_two_steps(
    env_flags: list[str], model: Path, api_url: str, engine_url: str, tmp_path: Path
) -> list[dict[str, Any]]:
    """Run the trainer (2 steps of 8 sequences, tiny model, CPU) and ``env_flags`` (``-m <module> serve
    --<env>.*``, to which the shared ``--env.*``/``--openai.*`` flags are added) side by side; both must
    exit 0. Returns the trainer's metrics rows."""
    save = tmp_path / "trainer"
    trainer_argv = trainer_cmd(
        model, api_url, save, 2, "--weight-refresh", "none", seq_len=256, batch_wait_timeout=120
    )
    env_argv = [
        sys.executable, *env_flags,
        "--env.group_size", "4", "--env.total_steps", "2", "--env.max_token_length", "256",
        "--env.ensure_scores_are_not_same", "false", "--env.spool_dir", str(tmp_path / "spool"),
        "--env.tokenizer_name", str(model), "--env.rollout_server_url", api_url,
        "--openai.base_url", engine_url + "/v1", "--openai.model_name", "tiny",
    ]  # fmt: skip
    env_log = open(tmp_path / "env.log", "wb")
    procs = [
        start(trainer_argv, tmp_path / "trainer.log"),
        subprocess.Popen(
            env_argv, stdout=env_log, stderr=subprocess.STDOUT, env=child_env(), cwd=tmp_path
        ),
    ]
    env_log.close()
    try:
        for name, proc, limit in zip(("trainer", "env"), procs, (240, 60), strict=True):
            assert proc.wait(limit) == 0, (tmp_path / f"{name}.log").read_text()[-3000:]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait(10)
    assert "Traceback" not in (tmp_path / "env.log").read_text()
    return read_jsonl(save / "metrics.jsonl")
