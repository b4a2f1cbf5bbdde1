"""Shared pieces of the env-runtime tests: a trainer stand-in on a thread, env subprocesses."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Optional

from atroposlib.api.client import TrajectoryClient
from atroposlib.errors import APIUnavailable
from atroposlib.type_definitions import Registration

EXAMPLE_ENV = Path(__file__).with_name("example_env.py")
REPO_ROOT = Path(__file__).resolve().parents[2]


class FakeTrainer(threading.Thread):
    """Registers with the API and pulls + acks batches until `num_steps`, tolerating API outages."""

    def __init__(
        self, api_url: str, batch_size: int = 8, num_steps: int = 3, pause: float = 0.0
    ) -> None:
        super().__init__(daemon=True)
        self.api_url = api_url
        self.batch_size, self.num_steps, self.pause = batch_size, num_steps, pause
        self.batches: list[list] = []
        self.done = threading.Event()
        self.halt = threading.Event()

    def run(self) -> None:
        client = TrajectoryClient(self.api_url, retries=1, timeout=10)
        registered = False
        while not self.halt.is_set() and len(self.batches) < self.num_steps:
            try:
                if not registered:
                    client.register(
                        Registration(
                            batch_size=self.batch_size, max_token_len=512, num_steps=self.num_steps
                        )
                    )
                    registered = True
                resp = client.get_batch()
                if resp.batch:
                    self.batches.append(resp.batch)
                    client.ack_batch(resp.batch_id)
                    time.sleep(self.pause)
                else:
                    time.sleep(0.2)
            except APIUnavailable:
                time.sleep(0.3)
        client.close()
        self.done.set()


def env_command(sub: str, *args: str, env_file: Path = EXAMPLE_ENV) -> list[str]:
    return [sys.executable, str(env_file), sub, *args]


def start_env(sub: str, *args: str, log: Path, env_file: Path = EXAMPLE_ENV) -> subprocess.Popen:
    environ = dict(os.environ, PYTHONPATH=str(REPO_ROOT), WANDB_MODE="disabled")
    return subprocess.Popen(
        env_command(sub, *args, env_file=env_file),
        stdout=open(log, "wb"),
        stderr=subprocess.STDOUT,
        env=environ,
        cwd=str(log.parent),
    )


def run_env(
    sub: str, *args: str, cwd: Path, timeout: float = 120, env_file: Path = EXAMPLE_ENV
) -> subprocess.CompletedProcess:
    environ = dict(os.environ, PYTHONPATH=str(REPO_ROOT), WANDB_MODE="disabled")
    return subprocess.run(
        env_command(sub, *args, env_file=env_file),
        capture_output=True,
        text=True,
        env=environ,
        cwd=str(cwd),
        timeout=timeout,
    )


def wait_until(
    predicate, timeout: float, what: str, proc: Optional[subprocess.Popen] = None
) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        if proc is not None and proc.poll() is not None:
            raise AssertionError(f"process exited ({proc.returncode}) while waiting for {what}")
        time.sleep(0.1)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


def serve_args(api_url: str, fake_url: str, tok_dir: Path, tmp: Path, *extra: str) -> list[str]:
    """The flags a test ``serve`` run needs: API and inference URLs, tokenizer, the JSONL of
    generated groups (``tmp/sent.jsonl``), its own spool (``tmp/spool``), all-equal scores kept."""
    return [
        "--env.rollout_server_url",
        api_url,
        "--openai.base_url",
        fake_url,
        "--env.tokenizer_name",
        str(tok_dir),
        "--env.data_path_to_save_groups",
        str(tmp / "sent.jsonl"),
        "--env.spool_dir",
        str(tmp / "spool"),
        "--env.ensure_scores_are_not_same",
        "false",
        *extra,
    ]
