"""Throughput of the trajectory API: SQLite (durable) vs memory store, measured in one run.

Starts the real ``run-api`` as a subprocess per store, pushes groups of 16 x 2048 tokens (+ masks +
inference logprobs, ~1 MB of JSON each) from concurrent clients, then drains them as batches the
way the trainer does, and prints ingest and egress groups/s and MB/s side by side, with the
sqlite/memory ratio and the targets.

What the client side does, so that it is not the bottleneck it measures yet stays honest:

* ingest: each client thread keeps one stdlib ``http.client`` keep-alive connection and sends a
  body serialized once up front (only the group_id prefix differs), so the figure is the server's
  (the client's CPU per group is printed: well under 1 ms);
* egress: the trainer's own client, ``TrajectoryClient.get_batch()`` + ``ack_batch()``, over real
  HTTP: it receives every batch and parses all of its groups into Python objects (using the
  ``X-Batch-Group-Bytes`` header to parse group by group) and validates the ``BatchResponse``
  shape, exactly what ``example_trainer`` gets. (Earlier versions drained with a bare
  ``http.client`` loop and one ``orjson.loads`` of the whole batch.)

With ``--atropos-python PY`` the same rounds also measure Atropos 0.4.0's own server, started as
``PY -m atroposlib.cli.run_api`` (a separate virtual environment holding PyPI's ``atroposlib==0.4.0``):
the same bodies in, and its ``GET /batch`` drained with httpx + orjson (it has no ack), so the two
are compared on one machine at one time. Each figure is the median of the rounds (best in brackets).

    python bench/api_throughput.py [--groups 400] [--batch-groups 8] [--clients 2] [--rounds 2]
        [--atropos-python /path/to/venv/bin/python]
"""

from __future__ import annotations

import argparse
import http.client
import os
import random
import shutil
import statistics
import subprocess
import tempfile
import threading
import time
from pathlib import Path

import httpx
import orjson
from subprocs import launch, shut_down

from atroposlib.api.client import TrajectoryClient
from atroposlib.utils.net import free_port, wait_for_http

SEQS, SEQ_LEN = 16, 2048
ATROPOS = "atropos-0.4.0"
TARGET_INGEST, TARGET_EGRESS, TARGET_RATIO = 190.0, 150.0, 0.75


def make_body_tail(seed: int = 0) -> bytes:
    """The group JSON without its opening brace; each request prepends a unique group_id."""
    rng = random.Random(seed)
    tokens = [[rng.randint(0, 50_000) for _ in range(SEQ_LEN)] for _ in range(SEQS)]
    group = {
        "tokens": tokens,
        "masks": [[-100] * 256 + t[256:] for t in tokens],
        "scores": [rng.random() for _ in range(SEQS)],
        "inference_logprobs": [[-rng.random() * 4 for _ in range(SEQ_LEN)] for _ in range(SEQS)],
        "policy_version": 0,
    }
    return orjson.dumps(group)[1:]


REGISTRATION = {  # every field Atropos 0.4.0's /register requires
    "wandb_group": "bench",
    "wandb_project": "bench",
    "checkpoint_dir": "ckpt",
    "save_checkpoint_interval": 1000,
    "max_token_len": SEQ_LEN,
    "starting_step": 0,
    "num_steps": 1000,
}


def start_server(store: str, port: int, data_dir: Path, atropos_python: str) -> subprocess.Popen:
    """Our ``run-api`` with ``store``, or (store ``atropos-0.4.0``) Atropos's own server."""
    if store != ATROPOS:
        flags = ["--host", "127.0.0.1", "--store", store, "--data-dir", str(data_dir)]
        return launch(
            "atroposlib.cli.run_api", port, [*flags, "--log-level", "warning"], timeout=60
        )
    cmd = [atropos_python, "-m", "atroposlib.cli.run_api", "--host", "127.0.0.1"]
    proc = subprocess.Popen(
        [*cmd, "--port", str(port)],
        # neither this checkout (cwd) nor PYTHONPATH: our atroposlib must not shadow 0.4.0
        cwd=data_dir,
        env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for_http(f"http://127.0.0.1:{port}/", timeout=120, proc=proc)  # it has no /health
    except BaseException:
        shut_down(proc)
        raise
    return proc


def run_store(
    store: str, n_groups: int, batch_groups: int, clients: int, tail: bytes, atropos_python: str
) -> dict:
    port = free_port()
    data_dir = Path(tempfile.mkdtemp(prefix=f"bench-api-{store}-"))
    url, proc = f"http://127.0.0.1:{port}", None
    try:
        proc = start_server(store, port, data_dir, atropos_python)
        with httpx.Client(base_url=url, timeout=60) as h:
            h.post("/register", json={**REGISTRATION, "batch_size": SEQS * batch_groups})
            h.get("/batch")
        counter = iter(range(n_groups))
        lock = threading.Lock()
        sent_bytes = [0]
        errors = []

        def push():
            # stdlib keep-alive connection and one body serialized up front whose group_id digits
            # are rewritten in place: the client costs next to nothing, so the server is measured
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
            headers = {"Content-Type": "application/json"}
            head = b'{"group_id":"bench-'
            body = bytearray(head + b'%08d",' % 0 + tail)
            try:
                while True:
                    with lock:
                        i = next(counter, None)
                    if i is None:
                        return
                    body[len(head) : len(head) + 8] = b"%08d" % i
                    conn.request("POST", "/scored_data", body=body, headers=headers)
                    r = conn.getresponse()
                    answer = r.read()
                    if r.status != 200:
                        errors.append(answer.decode(errors="replace"))
                        return
                    with lock:
                        sent_bytes[0] += len(body)
            finally:
                conn.close()

        threads = [threading.Thread(target=push) for _ in range(clients)]
        s0 = server_cpu(proc.pid)
        c0 = time.process_time()
        t0 = time.perf_counter()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        ingest_s = time.perf_counter() - t0
        ingest_client_cpu = time.process_time() - c0
        s1 = server_cpu(proc.pid)
        if errors:
            raise RuntimeError(f"ingest failed: {errors[0][:200]}")

        c0 = time.process_time()
        t0 = time.perf_counter()
        if store == ATROPOS:
            got_groups, got_bytes = _drain_atropos(url)
        else:
            got_groups = _drain(url)
            got_bytes = _metric(url, "atropos_batch_bytes_total")
        egress_s = time.perf_counter() - t0
        egress_client_cpu = time.process_time() - c0
        s2 = server_cpu(proc.pid)
        expected = (n_groups // batch_groups) * batch_groups
        if got_groups != expected:
            raise RuntimeError(f"drained {got_groups} groups, expected {expected}")
        return {
            "store": store,
            "ingest_gps": n_groups / ingest_s,
            "ingest_mbs": sent_bytes[0] / ingest_s / 1e6,
            "egress_gps": got_groups / egress_s,
            "egress_mbs": got_bytes / egress_s / 1e6,
            "ingest_client_ms": ingest_client_cpu / n_groups * 1e3,
            "egress_client_ms": egress_client_cpu / max(got_groups, 1) * 1e3,
            "ingest_server_ms": (s1 - s0) / n_groups * 1e3,
            "egress_server_ms": (s2 - s1) / max(got_groups, 1) * 1e3,
        }
    finally:
        shut_down(proc, grace=15)
        shutil.rmtree(data_dir, ignore_errors=True)


def server_cpu(pid: int) -> float:
    """CPU seconds (user + system, all threads) the server process has used; NaN off Linux.

    A shared machine's load changes the wall-clock figures from run to run; the server's CPU per
    group changes much less, so it is printed beside them."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return float("nan")
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _drain(url: str) -> int:
    """Every batch through the trainer's client: received, parsed into dicts, acknowledged."""
    got_groups = 0
    with TrajectoryClient(url, timeout=60) as trainer:
        while True:
            b = trainer.get_batch()  # received and parsed into dicts, as the trainer gets it
            if b.batch is None:
                return got_groups
            got_groups += len(b.batch)
            trainer.ack_batch(b.batch_id)


def _drain_atropos(url: str) -> tuple[int, int]:
    """Atropos 0.4.0's ``GET /batch`` until it is empty (it has no ack): groups and bytes."""
    got_groups = got_bytes = 0
    with httpx.Client(base_url=url, timeout=120) as h:
        while True:
            r = h.get("/batch")
            batch = orjson.loads(r.content)["batch"]
            if not batch:
                return got_groups, got_bytes
            got_groups += len(batch)
            got_bytes += len(r.content)


def _metric(url: str, name: str) -> float:
    """A counter from the server's GET /metrics (here: the bytes of the batches it sent)."""
    text = httpx.get(url + "/metrics", timeout=60).text
    for line in text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    raise RuntimeError(f"metric {name} not found")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--groups", type=int, default=400, help="groups pushed per store")
    ap.add_argument(
        "--batch-groups", type=int, default=8, help="groups per batch (batch_size = 16 x this)"
    )
    ap.add_argument("--clients", type=int, default=2, help="concurrent ingest connections")
    ap.add_argument(
        "--rounds", type=int, default=2, help="interleaved rounds per store (median and best shown)"
    )
    ap.add_argument(
        "--atropos-python",
        help="the python of a virtual environment with PyPI's atroposlib==0.4.0: also measure "
        "Atropos's own server in the same rounds",
    )
    args = ap.parse_args()
    tail = make_body_tail()
    print(
        f"group: {SEQS} x {SEQ_LEN} tokens + masks + inference_logprobs = {(len(tail) + 30) / 1e6:.2f} MB JSON; "
        f"{args.groups} groups, batch = {args.batch_groups} groups, {args.clients} ingest clients"
    )
    stores = ["memory", "sqlite"] + ([ATROPOS] if args.atropos_python else [])
    runs: dict[str, list[dict]] = {store: [] for store in stores}
    for _ in range(args.rounds):  # interleaved rounds (shared machine)
        for store in stores:
            r = run_store(
                store, args.groups, args.batch_groups, args.clients, tail, args.atropos_python
            )
            runs[store].append(r)
            print(
                f"  {store:14} ingest {r['ingest_gps']:6.1f} g/s ({r['ingest_server_ms']:.2f} ms "
                f"server CPU/group), egress {r['egress_gps']:6.1f} g/s "
                f"({r['egress_server_ms']:.2f} ms)",
                flush=True,
            )
    rows = {}
    for store, results in runs.items():
        row = {"store": store}
        for key in ("ingest_gps", "ingest_mbs", "egress_gps", "egress_mbs"):
            row[key] = statistics.median(r[key] for r in results)
            row[key + "_best"] = max(r[key] for r in results)
        for key in ("ingest_client_ms", "egress_client_ms"):
            row[key] = min(r[key] for r in results)
        for key in ("ingest_server_ms", "egress_server_ms"):
            row[key] = statistics.median(r[key] for r in results)
        rows[store] = row
    print(
        f"median [best] of {args.rounds} interleaved round(s) per store "
        f"(load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs)"
    )
    print(
        f"{'store':14} {'ingest g/s':>16} {'ingest MB/s':>12} {'egress g/s':>16} {'egress MB/s':>12}"
        f" {'server CPU ms/group (in/out)':>29} {'client (in/out)':>16}"
    )
    for r in rows.values():
        print(
            f"{r['store']:14} {r['ingest_gps']:7.1f} [{r['ingest_gps_best']:6.1f}] {r['ingest_mbs']:12.1f}"
            f" {r['egress_gps']:7.1f} [{r['egress_gps_best']:6.1f}] {r['egress_mbs']:12.1f}"
            f" {r['ingest_server_ms']:18.2f} / {r['egress_server_ms']:<8.2f}"
            f" {r['ingest_client_ms']:7.2f} / {r['egress_client_ms']:.2f}"
        )
    mem, sql = rows["memory"], rows["sqlite"]
    ri, re_ = sql["ingest_gps"] / mem["ingest_gps"], sql["egress_gps"] / mem["egress_gps"]
    print(f"sqlite/memory ratio: ingest {ri:.2f}, egress {re_:.2f} (target >= {TARGET_RATIO})")
    if ATROPOS in rows:
        at = rows[ATROPOS]
        print(
            f"vs Atropos 0.4.0: ingest {sql['ingest_gps'] / at['ingest_gps']:.2f}x (sqlite), "
            f"{mem['ingest_gps'] / at['ingest_gps']:.2f}x (memory); egress "
            f"{sql['egress_gps'] / at['egress_gps']:.2f}x (sqlite), "
            f"{mem['egress_gps'] / at['egress_gps']:.2f}x (memory)"
        )
    print(
        f"targets (sqlite): ingest >= {TARGET_INGEST:.0f} g/s: {'PASS' if sql['ingest_gps'] >= TARGET_INGEST else 'MISS'}; "
        f"egress >= {TARGET_EGRESS:.0f} g/s: {'PASS' if sql['egress_gps'] >= TARGET_EGRESS else 'MISS'}; "
        f"ratio: {'PASS' if min(ri, re_) >= TARGET_RATIO else 'MISS'}"
    )


if __name__ == "__main__":
    main()
