"""Running the Atropos-style env files of ``tests/compat/envs`` as real subprocesses."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

ENVS = Path(__file__).with_name("envs")
REPO_ROOT = Path(__file__).resolve().parents[2]


def env_environ(**extra: str) -> dict[str, str]:
    return dict(os.environ, PYTHONPATH=str(REPO_ROOT), WANDB_MODE="disabled", **extra)


def run_file(
    name: str, *args: str, cwd: Path, timeout: float = 180, **extra_env: str
) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(ENVS / name), *args],
        capture_output=True,
        text=True,
        env=env_environ(**extra_env),
        cwd=str(cwd),
        timeout=timeout,
    )


def start_file(name: str, *args: str, log: Path, **extra_env: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, str(ENVS / name), *args],
        stdout=open(log, "wb"),
        stderr=subprocess.STDOUT,
        env=env_environ(**extra_env),
        cwd=str(log.parent),
    )


def process_args(fake_url: str, tok_dir: Path, out: Path, *extra: str) -> list[str]:
    return [
        "process",
        "--openai.base_url",
        fake_url,
        "--env.tokenizer_name",
        str(tok_dir),
        "--env.data_path_to_save_groups",
        str(out),
        "--env.ensure_scores_are_not_same",
        "false",
        *extra,
    ]


def run_coro(coro: Any) -> Any:
    """``asyncio.run(coro)`` on a fresh thread: safe even when an earlier test (a session-wide sync
    Playwright) left an event loop running on the main thread."""
    import asyncio
    import threading

    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["value"] = asyncio.run(coro)
        except BaseException as e:  # re-raised on the caller's thread
            box["error"] = e

    t = threading.Thread(target=target)
    t.start()
    t.join()
    if "error" in box:
        raise box["error"]
    return box["value"]
