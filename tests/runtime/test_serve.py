"""`serve` as a subprocess against a real `run-api`: feeds the trainer, survives an API outage."""

from __future__ import annotations

import re
import signal
import threading
import time
from pathlib import Path

from atroposlib.api.client import TrajectoryClient
from atroposlib.testing import FakeOpenAIServer
from tests.envs.conftest import answer_responder
from tests.envs.helpers import FakeTrainer, serve_args, start_env, wait_until
from tests.jsonl import read_jsonl


def _jsonl_group_ids(path: Path) -> list:
    if not path.exists():
        return []
    return [g["group_id"] for g in read_jsonl(path)]


def _api_groups(url: str) -> list:
    with TrajectoryClient(url, retries=3) as c:
        return [p.group for p in c.peek(limit=1000).groups]


def test_serve_feeds_trainer_and_stamps_groups(run_api, fake_server, tok_dir, tmp_path):
    api = run_api()
    trainer = FakeTrainer(api.url, batch_size=8, num_steps=3)
    proc = start_env(
        "serve",
        *serve_args(api.url, fake_server.base_url, tok_dir, tmp_path, "--env.total_steps", "3"),
        log=tmp_path / "env.log",
    )
    try:
        # The trainer has not started: the env waits politely (no error, no exit) until it does.
        wait_until(
            lambda: "no trainer has registered with it yet" in (tmp_path / "env.log").read_text(),
            60,
            "the env to wait for the trainer",
            proc,
        )
        waiting = (tmp_path / "env.log").read_text()
        assert f"atropos-grpo --api-url {api.url}" in waiting and "atropos-sft-gen" in waiting
        trainer.start()
        rc = proc.wait(90)
    finally:
        if proc.poll() is None:
            proc.kill()
    log = (tmp_path / "env.log").read_text()
    assert rc == 0, log[-3000:]
    assert trainer.done.wait(30) or len(trainer.batches) >= 2, (
        f"trainer got {len(trainer.batches)} batches"
    )
    written = _jsonl_group_ids(tmp_path / "sent.jsonl")
    received = _api_groups(api.url)
    assert written and set(written) == {g["group_id"] for g in received}, (
        len(written),
        len(received),
        log[-2000:],
    )
    for g in received:
        assert g["env_id"] == 0 and g["policy_version"] >= 0 and len(g["tokens"]) == 4
        assert all(len(m) == len(t) for m, t in zip(g["masks"], g["tokens"], strict=True))
        assert len(g["inference_logprobs"][0]) == len(g["tokens"][0])
    assert "could not /disconnect-env" not in log and "Traceback" not in log, log[-3000:]


def test_serve_loses_no_group_when_the_api_dies_for_a_while(run_api, tok_dir, tmp_path):
    gate = threading.Event()
    gate.set()
    held = threading.Event()  # a generation is blocked at the closed gate, i.e. in flight

    def gated(prompt_text: str, body: dict) -> str:
        if not gate.is_set():
            held.set()
        gate.wait(60)
        return answer_responder(prompt_text, body)

    api = run_api()
    trainer = FakeTrainer(api.url, batch_size=8, num_steps=6, pause=0.2)
    with FakeOpenAIServer(tokenizer=tok_dir, responder=gated) as fake:
        proc = start_env(
            "serve",
            *serve_args(
                api.url,
                fake.base_url,
                tok_dir,
                tmp_path,
                "--env.total_steps",
                "6",
                "--env.max_num_workers",
                "2",
            ),
            log=tmp_path / "env.log",
        )
        trainer.start()
        sent = tmp_path / "sent.jsonl"
        try:
            # close the gate after the first group, while most of the 6 items are still to be generated
            wait_until(lambda: len(_jsonl_group_ids(sent)) >= 1, 60, "a first group", proc)
            gate.clear()  # hold the next generation in flight
            wait_until(held.is_set, 30, "a generation in flight", proc)
            api.kill()
            before = len(_jsonl_group_ids(sent))
            gate.set()  # the in-flight item now finishes while the API is down
            wait_until(
                lambda: len(_jsonl_group_ids(sent)) > before,
                30,
                "a group finished during the outage",
                proc,
            )
            # the group is written to sent.jsonl just before it is spooled: wait for the spool too
            wait_until(
                lambda: (tmp_path / "spool" / "groups.jsonl").read_text().count("\n") >= 1,
                30,
                "the group to be spooled",
                proc,
            )
            time.sleep(2.0)
            api2 = run_api("--resume", data_dir=api.data_dir, port=api.port)
            rc = proc.wait(120)
        finally:
            gate.set()
            trainer.halt.set()
            if proc.poll() is None:
                proc.kill()
    log = (tmp_path / "env.log").read_text()
    assert rc == 0, log[-3000:]
    written = _jsonl_group_ids(sent)
    received = {g["group_id"] for g in _api_groups(api2.url)}
    assert set(written) <= received, f"lost {len(set(written) - received)} of {len(written)} groups"
    assert "trajectory API unreachable" in log


def test_sigterm_finishes_in_flight_work_disconnects_and_exits_0(
    run_api, fake_server, tok_dir, tmp_path
):
    api = run_api()
    trainer = FakeTrainer(api.url, batch_size=8, num_steps=1000, pause=0.5)
    proc = start_env(
        "serve",
        *serve_args(api.url, fake_server.base_url, tok_dir, tmp_path, "--env.total_steps", "1000"),
        log=tmp_path / "env.log",
    )
    trainer.start()
    sent = tmp_path / "sent.jsonl"
    try:
        wait_until(lambda: len(_jsonl_group_ids(sent)) >= 2, 60, "first groups", proc)
        proc.send_signal(signal.SIGTERM)
        rc = proc.wait(60)
    finally:
        trainer.halt.set()
        if proc.poll() is None:
            proc.kill()
    log = (tmp_path / "env.log").read_text()
    assert rc == 0, log[-3000:]
    assert (
        "received SIGTERM" in log
        and "could not /disconnect-env" not in log
        and "serve finished" in log
    )
    finished = log[log.index("serve finished") :].splitlines()[0]  # readable, not a Python dict
    assert re.fullmatch(r"serve finished: (\w+=\d+ )*\w+=\d+", finished), finished
    assert "groups_sent=" in finished and "{" not in finished
    assert set(_jsonl_group_ids(sent)) <= {g["group_id"] for g in _api_groups(api.url)}
