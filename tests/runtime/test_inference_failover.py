"""Inference-server failover in a real ``serve`` run: two CPU engine processes behind one env, one
is SIGKILLed mid-run and started again. The env keeps producing from the other, loses no group,
scores nothing as 0 because of the outage, and uses the first server again once it is back."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from atroposlib.api.client import TrajectoryClient
from atroposlib.utils.net import free_port, wait_for_http
from tests.envs.helpers import FakeTrainer, start_env, wait_until
from tests.jsonl import read_jsonl


class Engine:
    """``atropos-serve-model`` on a fixed loopback port (so it can come back at the same URL)."""

    def __init__(self, model_dir: Path, port: int, log: Path) -> None:
        self.model_dir, self.port, self.log = model_dir, port, log
        self.url = f"http://127.0.0.1:{port}"
        self.proc: subprocess.Popen | None = None

    def start(self) -> Engine:
        cmd = [
            sys.executable,
            "-m",
            "atroposlib.cli.serve_model",
            "--model",
            str(self.model_dir),
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--served-model-name",
            "tiny",
            "--torch-threads",
            "1",
            "--log-level",
            "warning",
        ]
        self.proc = subprocess.Popen(cmd, stdout=open(self.log, "ab"), stderr=subprocess.STDOUT)
        wait_for_http(self.url + "/health", timeout=120, proc=self.proc)
        return self

    def kill9(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(10)

    def requests_served(self) -> float:
        text = httpx.get(self.url + "/metrics", timeout=10).text
        return sum(
            float(m.group(1))
            for m in re.finditer(
                r'^atropos_inference_requests_total\{[^}]*status="200"[^}]*\} (\S+)', text, re.M
            )
        )


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory) -> Path:
    from atroposlib.inference.tiny_model import build_tiny_model

    return build_tiny_model(tmp_path_factory.mktemp("failover") / "model", seed=0)


def test_serve_survives_kill_9_of_one_of_two_inference_servers(run_api, tiny_model, tmp_path):
    a = Engine(tiny_model, free_port(), tmp_path / "a.log").start()
    b = Engine(tiny_model, free_port(), tmp_path / "b.log").start()
    api = run_api("--store", "sqlite")
    trainer = FakeTrainer(api.url, batch_size=8, num_steps=100000, pause=0.0)
    trainer.start()
    generated = tmp_path / "sent.jsonl"
    proc = start_env(
        "serve",
        "--env.rollout_server_url",
        api.url,
        "--openai.base_url",
        f"{a.url}/v1,{b.url}/v1",
        "--openai.model_name",
        "tiny",  # the engine answers 404 for any other name, as vLLM does
        "--openai.health_check_interval",
        "0.5",
        "--env.tokenizer_name",
        str(tiny_model),
        "--env.data_path_to_save_groups",
        str(generated),
        "--env.spool_dir",
        str(tmp_path / "spool"),
        "--env.ensure_scores_are_not_same",
        "false",
        "--env.total_steps",
        "100000",
        "--env.max_num_workers",
        "4",
        log=tmp_path / "env.log",
    )
    try:
        wait_until(
            lambda: len(read_jsonl(generated)) >= 2 and a.requests_served() and b.requests_served(),
            180,
            "groups from both servers",
            proc,
        )
        a.kill9()  # with requests in flight on it
        at_kill = len(read_jsonl(generated))
        b_at_kill = b.requests_served()
        wait_until(
            lambda: len(read_jsonl(generated)) >= at_kill + 4, 180, "groups from b alone", proc
        )
        assert b.requests_served() > b_at_kill
        a.start()  # back at the same URL
        wait_until(lambda: a.requests_served() >= 2, 120, "the env to use a again", proc)
        proc.send_signal(signal.SIGTERM)
        rc = proc.wait(90)
    finally:
        trainer.halt.set()
        if proc.poll() is None:
            proc.kill()
        a.kill9()
        b.kill9()
    log = (tmp_path / "env.log").read_text()
    assert rc == 0, log[-3000:]
    written = read_jsonl(generated)
    with TrajectoryClient(api.url) as c:
        received = {p.group["group_id"] for p in c.peek(limit=1000).groups}
    assert {g["group_id"] for g in written} <= received, "a group was lost"
    for g in written:  # nothing scored as a failure because of the outage: real generations only
        assert len(g["tokens"]) == 4 and g.get("reward_status") != "unavailable"
        assert all(
            len(lp) == len(t) for lp, t in zip(g["inference_logprobs"], g["tokens"], strict=True)
        )
    finished = log[log.rindex("serve finished") :]
    assert "hook_errors=0" in finished, finished
    assert "is DOWN" in log or "failing over" in log
    assert "healthy again" in log
