"""A small gzip body can still be a bomb: under 64 KiB on the wire, ~60 MiB inflated. A real
``run-api`` inflates it off the event loop (docs/api.md: "in a worker thread"), so ``/health`` keeps
answering while such bodies arrive back to back: inflated on the loop, each body held it for its
whole inflation (~0.3 s here), so ``/health`` got about one answer in per body."""

from __future__ import annotations

import gzip
import threading
import time
from pathlib import Path

import httpx

from tests.live_servers import run_api_server

LIMIT = 60_000_000  # --max-decompressed-bytes: each body is refused (413) after inflating this much
BODIES = 8  # four from each of two clients


def test_small_gzip_bombs_do_not_stall_the_event_loop(tmp_path: Path):
    bomb = gzip.compress(b"[" + b" " * 66_000_000 + b"]", compresslevel=9)
    assert len(bomb) < 64 * 1024  # "small": the size that used to be inflated on the loop
    api = run_api_server(
        tmp_path / "data", "--store", "memory", "--max-decompressed-bytes", str(LIMIT)
    ).start()
    answers: list[tuple[float, float]] = []  # (answered at, latency)
    done = threading.Event()

    def poll() -> None:
        with httpx.Client(base_url=api.url, timeout=60) as h:
            while not done.is_set():
                t0 = time.perf_counter()
                assert h.get("/health").status_code == 200
                t1 = time.perf_counter()
                answers.append((t1, t1 - t0))
                time.sleep(0.005)

    def post_bombs() -> None:
        with httpx.Client(base_url=api.url, timeout=60) as h:
            for _ in range(BODIES // 2):
                r = h.post("/scored_data", content=bomb, headers={"Content-Encoding": "gzip"})
                assert r.status_code == 413 and "decompressed" in r.json()["error"], r.text

    try:
        poller = threading.Thread(target=poll, daemon=True)
        posters = [threading.Thread(target=post_bombs, daemon=True) for _ in range(2)]
        poller.start()
        time.sleep(0.2)
        t0 = time.perf_counter()
        for p in posters:
            p.start()
        for p in posters:
            p.join(120)
        t1 = time.perf_counter()
        done.set()
        poller.join(30)
    finally:
        api.stop()
    during = [latency for at, latency in answers if t0 <= at <= t1]
    # off the loop, /health is answered every few milliseconds meanwhile (hundreds of answers);
    # on the loop, about once per body (16 answers for 12 bodies before the fix; 145 for 8 after)
    assert len(during) >= 4 * BODIES, (len(during), t1 - t0)
