"""Backpressure reaches generation; auth and availability failures never dead-letter a group.

Real `run-api` processes and real `serve` subprocesses against the fake OpenAI server.
"""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from atroposlib.api.client import AsyncTrajectoryClient, TrajectoryClient
from atroposlib.errors import APIError, APIUnavailable
from atroposlib.runtime.backpressure import SpoolSender, offpolicy_budget
from atroposlib.runtime.spool import Spool, SpoolSink
from atroposlib.testing import FakeOpenAIServer
from atroposlib.type_definitions import Registration
from tests.envs.conftest import answer_responder
from tests.envs.helpers import REPO_ROOT, serve_args, start_env, wait_until
from tests.jsonl import read_jsonl


def serve_args_long(*args: str) -> list:
    """``serve_args`` for a run that must not reach its total steps during the test."""
    return serve_args(*args, "--env.total_steps", "100000")


GROUP = {"tokens": [[1, 2], [1, 3]], "masks": [[-100, 2], [-100, 3]], "scores": [1.0, 0.0]}


def _unsent(spool_dir: Path) -> int:
    path, off = spool_dir / "groups.jsonl", spool_dir / "sent.offset"
    if not path.exists():
        return 0
    start = int(off.read_text() or 0) if off.exists() else 0
    with open(path, "rb") as f:
        f.seek(start)
        return sum(1 for line in f if line.endswith(b"\n"))


def test_a_full_api_stops_generation_at_the_offpolicy_budget(
    run_api, fake_server, tok_dir, tmp_path
):
    # the API holds 2 groups of 4 at most; the env's budget is 3 batches x 8 / 4 = 6 groups
    api = run_api("--store", "memory", "--max-queued-sequences", "8", "--retry-after-seconds", "1")
    with TrajectoryClient(api.url) as trainer:  # registers and starts, then never pulls again
        trainer.register(Registration(batch_size=8, max_token_len=512, num_steps=100000))
        trainer.get_batch()
    budget, workers = offpolicy_budget(3, 8, 4), 4
    proc = start_env(
        "serve",
        *serve_args_long(
            api.url,
            fake_server.base_url,
            tok_dir,
            tmp_path,
            "--env.max_num_workers",
            str(workers),
            "--env.max_batches_offpolicy",
            "3",
        ),
        log=tmp_path / "env.log",
    )
    generated = tmp_path / "sent.jsonl"
    try:
        wait_until(lambda: len(read_jsonl(generated)) >= 3, 60, "the queue to fill", proc)
        samples = []
        for _ in range(10):  # ~10 s against a full queue (before the fix: hundreds spooled)
            time.sleep(1.0)
            samples.append((_unsent(tmp_path / "spool"), len(read_jsonl(generated))))
        proc.send_signal(signal.SIGTERM)
        proc.wait(60)
    finally:
        if proc.poll() is None:
            proc.kill()
    log = (tmp_path / "env.log").read_text()
    assert max(s for s, _ in samples) <= budget, (samples, log[-2000:])
    # everything it ever generated: what the API holds (2) + at most the budget + what was in flight
    assert samples[-1][1] <= 2 + budget + workers, samples
    assert samples[-1][1] == samples[-4][1], f"still generating against a full API: {samples}"
    assert "the API asks us to wait" in log and "rejected group" not in log


class TokenTrainer(threading.Thread):
    """Pulls and acks batches with a bearer token, riding out outages and refusals."""

    def __init__(self, url: str, token: str) -> None:
        super().__init__(daemon=True)
        self.url, self.token = url, token
        self.halt = threading.Event()
        self.groups: list[str] = []

    def run(self) -> None:
        c = TrajectoryClient(self.url, token=self.token, retries=1, timeout=10)
        registered = False
        while not self.halt.is_set():
            try:
                if not registered:
                    c.register(Registration(batch_size=8, max_token_len=512, num_steps=100000))
                    registered = True
                b = c.get_batch()
                if b.batch:
                    self.groups += [g["group_id"] for g in b.batch]
                    c.ack_batch(b.batch_id)
                else:
                    time.sleep(0.2)
            except (APIUnavailable, APIError):
                time.sleep(0.3)
        c.close()


def test_a_refused_token_holds_groups_and_sends_them_when_it_is_accepted_again(
    run_api, tok_dir, tmp_path, monkeypatch
):
    gate, held = threading.Event(), threading.Event()
    gate.set()

    def gated(prompt_text: str, body: dict) -> str:
        if not gate.is_set():
            held.set()
        gate.wait(60)
        return answer_responder(prompt_text, body)

    monkeypatch.setenv("ATROPOS_API_TOKEN", "right")
    api = run_api("--store", "sqlite", "--api-token", "right")
    trainer = TokenTrainer(api.url, "right")
    trainer.start()
    generated, spool_dir = tmp_path / "sent.jsonl", tmp_path / "spool"
    with FakeOpenAIServer(tokenizer=tok_dir, responder=gated) as fake:
        proc = start_env(
            "serve",
            *serve_args_long(api.url, fake.base_url, tok_dir, tmp_path),
            log=tmp_path / "env.log",
        )
        try:
            wait_until(lambda: len(read_jsonl(generated)) >= 2, 60, "first groups", proc)
            gate.clear()  # hold the next generations in flight
            wait_until(held.is_set, 30, "a generation in flight", proc)
            api.kill()
            # the API comes back with another token: every request is a 401
            wrong = run_api(
                "--store",
                "sqlite",
                "--api-token",
                "other",
                "--resume",
                data_dir=api.data_dir,
                port=api.port,
            )
            gate.set()  # the in-flight items finish and are refused
            wait_until(lambda: _unsent(spool_dir) >= 1, 60, "groups refused with 401", proc)
            time.sleep(3.0)  # several refused attempts (before the fix: dead-lettered at once)
            assert _unsent(spool_dir) >= 1 and not (spool_dir / "rejected.jsonl").exists()
            wrong.kill()
            right = run_api(
                "--store",
                "sqlite",
                "--api-token",
                "right",
                "--resume",
                data_dir=api.data_dir,
                port=api.port,
            )
            wait_until(lambda: _unsent(spool_dir) == 0, 60, "the spool to drain", proc)
            proc.send_signal(signal.SIGTERM)
            rc = proc.wait(60)
        finally:
            gate.set()
            trainer.halt.set()
            if proc.poll() is None:
                proc.kill()
    log = (tmp_path / "env.log").read_text()
    assert rc == 0, log[-3000:]
    assert not (spool_dir / "rejected.jsonl").exists(), log[-3000:]
    with TrajectoryClient(right.url, token="right") as c:
        received = {p.group["group_id"] for p in c.peek(limit=1000).groups}
    written = {g["group_id"] for g in read_jsonl(generated)}
    assert written <= received, f"lost {len(written - received)} of {len(written)}"
    assert log.count("the API refuses our token") == 1 and "sending resumed" in log


def test_retry_after_is_honoured_and_content_errors_are_dead_lettered_with_a_resend_command(
    run_api, tmp_path
):
    api = run_api("--store", "memory", "--max-queued-sequences", "2", "--retry-after-seconds", "7")
    spool = Spool(tmp_path / "spool")
    for i in range(2):
        spool.append(dict(GROUP, group_id=f"g{i}"))
    spool.append(dict(GROUP, group_id="bad", scores=[1.0]))  # 422: one score for two sequences
    counts: dict[str, int] = {}

    async def go() -> list[float]:
        async with AsyncTrajectoryClient(api.url, retries=1) as c:
            sender = SpoolSender(spool, c, asyncio.Event(), counts)
            waits = [await sender.send_one(*spool.peek())]  # fits into the empty queue
            waits.append(await sender.send_one(*spool.peek()))  # queue full: 503 + Retry-After 7
            c2 = TrajectoryClient(api.url)
            c2.register(Registration(batch_size=2, max_token_len=64))
            c2.get_batch()  # the queue drains
            c2.close()
            waits.append(await sender.send_one(*spool.peek()))
            waits.append(await sender.send_one(*spool.peek()))  # the bad one: dead-lettered
            return waits

    waits = asyncio.run(go())
    assert waits == [0.0, 7.0, 0.0, 0.0] and spool.pending() == 0
    rejected = read_jsonl(spool.rejected_path)
    assert rejected[0]["group"]["group_id"] == "bad" and rejected[0]["reason"].startswith("422")
    spool.close()
    r = subprocess.run(
        [sys.executable, "-m", "atroposlib.runtime.spool", "resend", str(tmp_path / "spool")],
        capture_output=True,
        text=True,
        cwd=REPO_ROOT,
    )
    assert r.returncode == 0 and "1 rejected group(s) put back" in r.stdout, r.stderr
    again = Spool(tmp_path / "spool")
    assert again.pending() == 1 and again.peek()[1]["group_id"] == "bad"
    assert not again.rejected_path.exists()
    again.close()


def test_a_full_spool_makes_finished_groups_wait(tmp_path, caplog):
    spool = Spool(tmp_path / "spool", max_groups=2)

    async def go() -> tuple[bool, int]:
        sink = SpoolSink(spool, asyncio.Event(), poll_seconds=0.01)
        await sink.put(dict(GROUP, group_id="a"))
        await sink.put(dict(GROUP, group_id="b"))
        third = asyncio.create_task(sink.put(dict(GROUP, group_id="c")))
        await asyncio.sleep(0.2)
        waited = not third.done()
        spool.ack(spool.peek()[0])  # the sender got one through
        await asyncio.wait_for(third, 5)
        return waited, spool.pending()

    waited, pending = asyncio.run(go())
    assert waited and pending == 2
    assert "spool" in caplog.text and "is full" in caplog.text
    spool.close()


@pytest.mark.parametrize("size_limit", [300])
def test_the_spool_bound_counts_bytes_too(tmp_path, size_limit):
    spool = Spool(tmp_path / "spool", max_bytes=size_limit)
    spool.append(dict(GROUP, group_id="x" * 400))  # the first group always fits
    assert spool.full()
    spool.ack(spool.peek()[0])
    assert not spool.full() and spool.unsent_bytes == 0
    spool.close()
