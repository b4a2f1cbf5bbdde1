"""Large bodies do not freeze the server: while a big group (or a gzip bomb) is being ingested by a
real ``run-api``, ``/status`` keeps answering. Latency targets are measured by
``bench/large_body_latency.py``; here the margins are generous (the machine is shared)."""

from __future__ import annotations

import gzip
import os
import random
import threading
import time

import httpx
import orjson
from api_helpers import registration


def big_group(n: int = 96, length: int = 32768, seed: int = 0) -> bytes:
    """A large group (long sequences with masks and inference logprobs): ~100 MB of JSON, which
    held the event loop for ~1.8 s before the offload (bench/large_body_latency.py)."""
    rng = random.Random(seed)
    tokens = [rng.randrange(1, 150_000) for _ in range(length)]
    lps = [-rng.random() for _ in range(length)]
    return orjson.dumps(
        {
            "tokens": [tokens] * n,
            "masks": [[-100] * 64 + tokens[64:]] * n,
            "scores": [float(i % 2) for i in range(n)],
            "inference_logprobs": [lps] * n,
            "group_id": f"big-{seed}",
        }
    )


class StatusPoller(threading.Thread):
    """Polls ``/status`` back to back and records when each answer arrived and how long it took."""

    def __init__(self, url: str) -> None:
        super().__init__(daemon=True)
        self.url = url
        self.stop = threading.Event()
        self.answers: list[tuple[float, float]] = []  # (arrived at, latency)

    def run(self) -> None:
        with httpx.Client(base_url=self.url, timeout=60) as h:
            while not self.stop.is_set():
                t0 = time.monotonic()
                assert h.get("/status").status_code == 200
                t1 = time.monotonic()
                self.answers.append((t1, t1 - t0))
                time.sleep(0.01)


def _during(poller: StatusPoller, t0: float, t1: float) -> list[float]:
    return [lat for at, lat in poller.answers if t0 <= at <= t1]


def test_status_keeps_answering_while_a_large_group_is_ingested(run_api):
    api = run_api("--store", "sqlite", "--max-body-bytes", str(200 << 20))
    body = big_group()
    assert len(body) > 90 << 20
    with httpx.Client(base_url=api.url, timeout=120) as h:
        h.post("/register", json=registration(batch_size=128, max_token_len=40000))
        poller = StatusPoller(api.url)
        poller.start()
        time.sleep(0.3)
        t0 = time.monotonic()
        r = h.post("/scored_data", content=body)
        t1 = time.monotonic()
        poller.stop.set()
        poller.join(30)
        assert r.status_code == 200, r.text
        during = _during(poller, t0, t1)
        del body
        # the server worked on the body for a while, and kept answering meanwhile
        assert len(during) >= 5, (len(during), t1 - t0)
        assert max(during) < 1.0, (max(during), t1 - t0)
        status = h.get("/status").json()  # and the group is there, whole
        assert status["queue_size"] == 1 and status["queued_sequences"] == 96


def test_status_keeps_answering_during_gzip_bombs(run_api):
    api = run_api("--store", "memory")
    bomb = gzip.compress(b"[" + b" " * (1 << 30) + b"]", compresslevel=9)  # ~1 MB -> 1 GiB
    assert len(bomb) < 2 << 20
    with httpx.Client(base_url=api.url, timeout=120) as h:
        poller = StatusPoller(api.url)
        poller.start()
        time.sleep(0.3)
        t0 = time.monotonic()
        for _ in range(4):
            r = h.post("/scored_data", content=bomb, headers={"Content-Encoding": "gzip"})
            assert r.status_code == 413 and "decompressed" in r.json()["error"]
        t1 = time.monotonic()
        poller.stop.set()
        poller.join(30)
        during = _during(poller, t0, t1)
        assert len(during) >= 5, (len(during), t1 - t0)
        assert max(during) < 1.0, (max(during), t1 - t0)


def test_a_large_invalid_group_gets_the_same_precise_422(run_api):
    api = run_api("--store", "memory", "--offload-min-bytes", "1000")
    bad = orjson.loads(big_group(n=2, length=4000))
    bad["masks"][1] = bad["masks"][1][:-1]
    with httpx.Client(base_url=api.url, timeout=60) as h:
        r = h.post("/scored_data", content=orjson.dumps(bad))
        assert r.status_code == 422, r.text
        assert "masks[1] has 3999 values but tokens[1] has 4000 tokens" in r.json()["error"]
        deep = b"[" * 5000 + b"]" * 5000
        r = h.post("/scored_data", content=deep)
        assert r.status_code == 422 and "nested too deeply" in r.json()["error"], r.text


def test_a_body_taken_through_the_offload_is_stored_as_received_plus_null_keys(run_api):
    api = run_api("--store", "sqlite", "--offload-min-bytes", "1000")
    g = orjson.loads(big_group(n=2, length=300, seed=3))
    with httpx.Client(base_url=api.url, timeout=60) as h:
        h.post("/register", json=registration(batch_size=4))
        h.get("/batch")
        body = orjson.dumps(g) + b"  \n"  # trailing whitespace is fine
        assert h.post("/scored_data", content=body).json() == {"status": "received"}
        lax = dict(g, group_id="lax", tokens=[[float(t) for t in s] for s in g["tokens"]])
        assert h.post("/scored_data", content=orjson.dumps(lax)).status_code == 200
        out = h.get("/batch").json()["batch"]
    first, second = out
    assert first["tokens"] == g["tokens"] and first["advantages"] is None
    assert first["messages"] is None and first["group_id"] == "big-3"
    assert second["tokens"] == g["tokens"] and second["group_id"] == "lax"


def _children(pid: int) -> list[int]:
    out = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                stat = open(f"/proc/{d}/stat").read()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                out.append(int(d))
    return out


def test_no_helper_process_outlives_a_killed_server(run_api):
    api = run_api("--store", "memory", "--offload-min-bytes", "1000")
    with httpx.Client(base_url=api.url, timeout=60) as h:
        h.post("/register", json=registration(batch_size=4))
        assert h.post("/scored_data", content=big_group(n=2, length=300)).status_code == 200
    deadline = time.monotonic() + 30
    while not _children(api.proc.pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    helpers = _children(api.proc.pid)  # the fork server of the large-body worker
    assert helpers
    api.kill()  # SIGKILL: no shutdown hook runs
    deadline = time.monotonic() + 30
    while any(os.path.exists(f"/proc/{p}") for p in helpers) and time.monotonic() < deadline:
        time.sleep(0.1)
    alive = [p for p in helpers if os.path.exists(f"/proc/{p}")]
    assert not alive, f"helper processes left behind: {alive}"
