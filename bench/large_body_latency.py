"""Does a large ingest freeze the trajectory API? ``/status`` latency while a big group is posted.

Starts the real ``run-api`` twice in one run: once with large bodies handled on the event loop
(``--offload-min-bytes`` above the body size: the behaviour before the offload), once with the
default (bodies >= 8 MiB parsed in a child process). In each, one thread polls ``/status`` back to
back while another posts one large group (``--seqs`` x ``--length`` tokens + masks + inference
logprobs, ~32 bytes of JSON per token: ~98 MiB by default), then four 1 MB gzip bombs (1 GiB each).
Prints the worst and median ``/status`` latency during each ingest, the target (100 ms) and the
ratio of worst latencies (on-loop / offloaded).

    python bench/large_body_latency.py [--seqs 96] [--length 32768]
"""

from __future__ import annotations

import argparse
import gzip
import random
import shutil
import statistics
import tempfile
import threading
import time
from pathlib import Path

import httpx
import orjson
from subprocs import launch, shut_down

from atroposlib.utils.net import free_port

TARGET_S = 0.100


def big_group(n: int, length: int) -> bytes:
    rng = random.Random(0)
    tokens = [rng.randrange(1, 150_000) for _ in range(length)]
    lps = [-rng.random() for _ in range(length)]
    return orjson.dumps(
        {
            "tokens": [tokens] * n,
            "masks": [[-100] * 64 + tokens[64:]] * n,
            "scores": [float(i % 2) for i in range(n)],
            "inference_logprobs": [lps] * n,
        }
    )


def poll_during(url: str, action) -> tuple[list[float], float]:
    """Latencies of /status answers that arrived while ``action()`` ran, and its duration."""
    answers: list[tuple[float, float]] = []
    stop = threading.Event()

    def poll() -> None:
        with httpx.Client(base_url=url, timeout=120) as h:
            while not stop.is_set():
                t0 = time.monotonic()
                h.get("/status")
                t1 = time.monotonic()
                answers.append((t1, t1 - t0))
                time.sleep(0.005)

    th = threading.Thread(target=poll, daemon=True)
    th.start()
    time.sleep(0.3)
    t0 = time.monotonic()
    action()
    t1 = time.monotonic()
    stop.set()
    th.join(120)
    return [lat for at, lat in answers if t0 <= at <= t1], t1 - t0


def run(mode: str, body: bytes, bomb: bytes) -> dict:
    port = free_port()
    tmp = Path(tempfile.mkdtemp(prefix="large-body-"))
    offload = str(10**12) if mode == "on-loop" else str(8 << 20)
    flags = ["--data-dir", str(tmp / "data"), "--store", "sqlite", "--log-level", "warning"]
    flags += ["--max-body-bytes", str(len(body) + (1 << 20)), "--offload-min-bytes", offload]
    url, proc = f"http://127.0.0.1:{port}", None
    try:
        proc = launch("atroposlib.cli.run_api", port, flags, timeout=60)
        with httpx.Client(base_url=url, timeout=300) as h:

            def post_group() -> None:
                assert h.post("/scored_data", content=body).status_code == 200

            def post_bombs() -> None:
                for _ in range(4):
                    h.post("/scored_data", content=bomb, headers={"Content-Encoding": "gzip"})

            group_lat, group_s = poll_during(url, post_group)
            bomb_lat, bomb_s = poll_during(url, post_bombs)
    finally:
        shut_down(proc)
        shutil.rmtree(tmp, ignore_errors=True)
    return {
        "mode": mode,
        "group": (group_lat, group_s),
        "bombs": (bomb_lat, bomb_s),
    }


def describe(lat: list[float], secs: float) -> str:
    if not lat:
        return f"no /status answer during {secs:.2f}s"
    return (
        f"{len(lat)} answers in {secs:.2f}s, worst {max(lat) * 1000:.0f} ms, "
        f"median {statistics.median(lat) * 1000:.1f} ms"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seqs", type=int, default=96)
    ap.add_argument("--length", type=int, default=32768)
    args = ap.parse_args()
    body = big_group(args.seqs, args.length)
    bomb = gzip.compress(b"[" + b" " * (1 << 30) + b"]", compresslevel=9)
    print(f"group: {args.seqs} x {args.length} tokens, {len(body) / 2**20:.1f} MiB of JSON")
    results = [run("on-loop", body, bomb), run("offloaded", body, bomb)]
    for r in results:
        print(f"{r['mode']:>9} | large group: {describe(*r['group'])}")
        print(f"{r['mode']:>9} | 4 gzip bombs: {describe(*r['bombs'])}")
    worst = {r["mode"]: max(r["group"][0] or [r["group"][1]]) for r in results}
    print(
        f"worst /status latency during the large group: on-loop {worst['on-loop'] * 1000:.0f} ms, "
        f"offloaded {worst['offloaded'] * 1000:.0f} ms (ratio {worst['on-loop'] / worst['offloaded']:.1f}x); "
        f"target <= {TARGET_S * 1000:.0f} ms: {'met' if worst['offloaded'] <= TARGET_S else 'NOT met'}"
    )


if __name__ == "__main__":
    main()
