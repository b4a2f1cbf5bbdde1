"""The real ``run-api`` process: legacy flow over HTTP, gzip, auth from flag and env var, the typed
client (sync + async, retries), and a SIGKILL crash test with exactly-once delivery of acked groups."""

from __future__ import annotations

import asyncio
import gzip
import os
import subprocess
import sys
import threading
import time

import httpx
import orjson
import pytest
from api_helpers import env_registration, group, registration

from atroposlib.api.client import AsyncTrajectoryClient, TrajectoryClient
from atroposlib.errors import APIError, APIUnavailable, AuthError
from atroposlib.type_definitions import RegisterEnv, Registration


def test_legacy_flow_gzip_and_status_env_body_over_real_http(run_api):
    api = run_api("--store", "sqlite", "--gzip-min-bytes", "2000")
    with httpx.Client(base_url=api.url, timeout=10) as h:
        assert h.post("/register", json=registration(batch_size=4)).json().keys() == {"uuid"}
        assert h.post("/register-env", json=env_registration()).json() == {
            "status": "wait for trainer to start"
        }
        assert h.get("/batch").json()["batch"] is None
        assert h.post("/register-env", json=env_registration()).json()["env_id"] == 0
        body = gzip.compress(
            orjson.dumps([group(2, length=100, env_id=0, seed=i) for i in range(2)])
        )
        r = h.post("/scored_data_list", content=body, headers={"Content-Encoding": "gzip"})
        assert r.json() == {"status": "received", "groups_processed": 2}
        s = h.request("GET", "/status-env", content=orjson.dumps({"env_id": 0}))
        assert s.json()["self_queue_size"] == 2
        raw = h.get("/batch", headers={"Accept-Encoding": "gzip"})
        assert raw.headers["content-encoding"] == "gzip"
        assert sum(len(g["tokens"]) for g in raw.json()["batch"]) == 4


def test_size_limits_and_gzip_bomb_over_real_http(run_api):
    api = run_api(
        "--store", "memory", "--max-body-bytes", "100000", "--max-decompressed-bytes", "200000"
    )
    with httpx.Client(base_url=api.url, timeout=30) as h:
        r = h.post("/scored_data", content=orjson.dumps(group(8, length=2000)))
        assert r.status_code == 413 and "100000" in r.json()["error"]
        bomb = gzip.compress(b"[" + b" " * 20_000_000 + b"]", compresslevel=9)
        r = h.post("/scored_data", content=bomb, headers={"Content-Encoding": "gzip"})
        assert r.status_code == 413 and "decompressed" in r.json()["error"]
        bad = group(2) | {"scores": [1.0]}
        assert h.post("/scored_data", content=orjson.dumps(bad)).status_code == 422
        assert h.get("/health").status_code == 200  # the server is fine afterwards
    log = api.log()
    assert "POST /scored_data -> 422: invalid request: scores has 1 entries" in log
    assert "-> 413" in log and "Traceback" not in log  # client mistakes: one line, no traceback


def test_token_from_flag_and_from_env_var(run_api, tmp_path):
    api = run_api("--store", "memory", "--api-token", "tok1")
    assert httpx.get(api.url + "/status").status_code == 401
    assert (
        httpx.get(api.url + "/status", headers={"Authorization": "Bearer tok1"}).status_code == 200
    )
    with TrajectoryClient(api.url, token="bad", retries=1) as c:
        with pytest.raises(AuthError):
            c.status()
    # the environment variable works for the CLI too
    port_env = dict(os.environ, ATROPOS_API_TOKEN="tok2")
    from atroposlib.utils.net import free_port, wait_for_http

    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "atroposlib.cli.run_api", "--port", str(port), "--store", "memory"],
        env=port_env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for_http(f"http://127.0.0.1:{port}/health", timeout=60, proc=proc)
        assert httpx.get(f"http://127.0.0.1:{port}/info").status_code == 401
        assert (
            httpx.get(
                f"http://127.0.0.1:{port}/info", headers={"Authorization": "Bearer tok2"}
            ).status_code
            == 200
        )
    finally:
        proc.terminate()
        proc.wait(15)


def test_cli_user_mistake_is_one_line_without_traceback(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "atroposlib.cli.run_api",
            "--data-dir",
            str(blocker / "sub"),
            "--port",
            "1",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert (
        r.returncode == 2 and "Traceback" not in r.stderr and r.stderr.startswith("run-api: error:")
    )


def test_typed_sync_client_end_to_end(run_api):
    api = run_api("--store", "sqlite")
    with TrajectoryClient(api.url) as c:
        assert c.health()["status"] == "ok"
        c.register(Registration(batch_size=4, max_token_len=64, num_steps=10))
        assert (
            c.register_env(RegisterEnv(max_token_length=64, desired_name="e", group_size=2)).status
            == "wait for trainer to start"
        )
        assert c.get_batch().batch is None
        env = c.register_env(RegisterEnv(max_token_length=64, desired_name="e", group_size=2))
        assert env.status == "success" and env.wandb_name == "e_0"
        assert c.post_scored_data(group(2, env_id=0)).status == "received"
        assert c.post_scored_data_list([group(2, env_id=0, seed=1)]).groups_processed == 1
        se = c.status_env(env.env_id)
        assert se.self_queue_size == 2 and se.current_step == 0
        b = c.get_batch()
        assert len(b.batch) == 2 and b.step == 1
        c.ack_batch(b.batch_id)
        assert c.info().batch_size == 4 and c.status().current_step == 1
        assert c.latest_example()["tokens"] == group(2, env_id=0, seed=1)["tokens"]
        assert len(c.peek(limit=10).groups) == 2
        with pytest.raises(APIError) as e:
            c.post_scored_data(group(2) | {"scores": [1.0]})
        assert e.value.status_code == 422 and "scores" in e.value.message
        assert c.disconnect_env(0)["status"] == "success"
        c.reset()
        assert c.info().batch_size == -1


def test_typed_async_client_end_to_end(run_api):
    api = run_api("--store", "memory")

    async def main():
        async with AsyncTrajectoryClient(api.url) as c:
            await c.register(Registration(batch_size=2, max_token_len=64))
            await c.get_batch()
            env = await c.register_env(
                RegisterEnv(max_token_length=64, desired_name="a", group_size=2)
            )
            await asyncio.gather(
                *(c.post_scored_data(group(2, env_id=env.env_id, seed=i)) for i in range(3))
            )
            b = await c.get_batch()
            await c.ack_batch(b.batch_id)
            return b, await c.status()

    b, status = asyncio.run(main())
    assert len(b.batch) == 1 and status.queue_size == 2 and status.current_step == 1


def test_client_retries_503_backpressure_until_space(run_api):
    api = run_api(
        "--store", "memory", "--max-queued-sequences", "4", "--retry-after-seconds", "0.2"
    )
    with TrajectoryClient(api.url, retries=50, retry_max_seconds=30) as c:
        c.register(Registration(batch_size=4, max_token_len=64))
        c.post_scored_data(group(2, seed=1))
        c.post_scored_data(group(2, seed=2))
        with TrajectoryClient(api.url, retries=1) as once, pytest.raises(APIUnavailable) as e:
            once.post_scored_data(group(2, seed=3))
        assert e.value.retry_after == 0.2
        done = threading.Event()

        def post():
            c.post_scored_data(group(2, seed=3))
            done.set()

        t = threading.Thread(target=post)
        t.start()
        time.sleep(0.6)
        assert not done.is_set()
        with TrajectoryClient(api.url) as trainer:
            trainer.get_batch()
        t.join(20)
        assert done.is_set()


def test_client_retries_while_server_is_down_and_back(run_api):
    api = run_api("--store", "sqlite")
    with TrajectoryClient(api.url) as c:
        c.register(Registration(batch_size=2, max_token_len=64))
        c.post_scored_data(group(2, group_id="before"))
    api.kill()
    result = {}

    def call():
        with TrajectoryClient(api.url, retries=100, retry_max_seconds=60) as c2:
            result["status"] = c2.status()

    t = threading.Thread(target=call)
    t.start()
    time.sleep(1.0)
    assert "status" not in result
    run_api("--store", "sqlite", "--resume", data_dir=api.data_dir, port=api.port)
    t.join(60)
    assert result["status"].queue_size == 1  # the committed group survived the SIGKILL


def test_sigkill_mid_ingest_every_acknowledged_group_delivered_exactly_once(run_api):
    api = run_api("--store", "sqlite")
    url = api.url
    h = httpx.Client(base_url=url, timeout=10)
    h.post("/register", json=registration(batch_size=4))
    h.get("/batch")
    acknowledged: list = []
    stop = threading.Event()

    def producer():
        i = 0
        with httpx.Client(base_url=url, timeout=10) as p:
            while not stop.is_set():
                gid = f"g{i}"
                try:
                    r = p.post(
                        "/scored_data",
                        content=orjson.dumps(group(2, length=64, seed=i, group_id=gid)),
                    )
                except httpx.TransportError:
                    return  # the server died mid-request: this group's fate is unknown
                if r.status_code == 200:
                    acknowledged.append(gid)
                i += 1

    t = threading.Thread(target=producer)
    t.start()
    trained: list = []
    # the trainer applies a batch, then acknowledges it; a batch it holds unacked at the crash is lost
    deadline = time.monotonic() + 20
    while len(trained) < 40 and time.monotonic() < deadline:
        b = h.get("/batch").json()
        if b["batch"] is None:
            time.sleep(0.01)
            continue
        trained.extend(g["group_id"] for g in b["batch"])
        h.post("/batch/ack", json={"batch_id": b["batch_id"]})
    held = h.get("/batch").json()  # handed out, never acknowledged
    while held["batch"] is None and time.monotonic() < deadline + 20:
        time.sleep(0.02)
        held = h.get("/batch").json()
    assert held["batch"] is not None
    time.sleep(0.2)
    api.kill()  # SIGKILL while the producer is posting
    t.join(10)
    stop.set()
    assert len(acknowledged) > len(trained)

    api2 = run_api("--store", "sqlite", "--resume", data_dir=api.data_dir, port=api.port)
    h2 = httpx.Client(base_url=api2.url, timeout=10)
    h2.post("/register", json=registration(batch_size=4))  # trainer restart
    first = h2.get("/batch").json()
    assert (
        first["batch_id"] == held["batch_id"] and first["step"] == held["step"]
    )  # redelivered first
    b = first
    while b["batch"] is not None:
        trained.extend(g["group_id"] for g in b["batch"])
        h2.post("/batch/ack", json={"batch_id": b["batch_id"]})
        b = h2.get("/batch").json()
    leftover = [
        g["group"]["group_id"]
        for g in h2.get("/peek?after=0&limit=1000").json()["groups"]
        if g["state"] == "queued"
    ]
    assert len(leftover) <= 1  # groups of 2 into batches of 4: at most one group waits
    assert len(trained) == len(set(trained)), "a group was trained twice"
    missing = set(acknowledged) - set(trained) - set(leftover)
    assert not missing, f"acknowledged groups lost: {sorted(missing)[:5]}"
    h.close()
    h2.close()


def test_busy_port_is_one_line_before_any_serving_claim(run_api, tmp_path):
    api = run_api("--store", "memory")
    r = subprocess.run(
        [sys.executable, "-m", "atroposlib.cli.run_api", "--port", str(api.port)]
        + ["--store", "memory"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert "serving on" not in r.stdout and "Traceback" not in r.stderr
    (line,) = r.stderr.strip().splitlines()
    assert line.startswith("run-api: error: cannot listen on") and "--port" in line


def test_run_api_says_when_groups_arrive_once_per_interval(run_api):
    """One activity line per interval in which something happened, not one per group."""
    api = run_api("--store", "memory", "--progress-interval", "1")
    with httpx.Client(base_url=api.url, timeout=10) as h:
        h.post("/register", json=registration(batch_size=4))
        h.get("/batch")
        env_id = h.post("/register-env", json=env_registration()).json()["env_id"]
        for i in range(5):
            h.post("/scored_data", content=orjson.dumps(group(2, env_id=env_id, seed=i)))
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            arrived = [line for line in api.log().splitlines() if "arrived in the last" in line]
            if sum(int(line.split("run-api: ")[1].split(" groups")[0]) for line in arrived) >= 5:
                break
            time.sleep(0.2)
        time.sleep(2.5)  # more intervals in which nothing happens: no more lines
    lines = [line for line in api.log().splitlines() if "arrived in the last" in line]
    assert 1 <= len(lines) <= 2, api.log()[-2000:]  # the posts may straddle two intervals
    assert sum(int(line.split("run-api: ")[1].split(" groups")[0]) for line in lines) == 5, lines
    assert "sequences) arrived in the last 1s" in lines[-1] and "queue " in lines[-1], lines
    assert "trainer step" in lines[-1], lines
