"""Soak: pushers + an acking trainer while ``run-api`` and the trainer are SIGKILLed at random.

Three pusher threads post small groups with unique ``group_id`` s (a group is *acknowledged* when a
POST answered 200; on any failure the same group is posted again, so the API's idempotency is what
prevents duplicates). The trainer is a separate process (this file with ``--trainer``) that does
what ``example_trainer`` does: register, pull a batch, "train" it (append its step and group ids
to ``trained.jsonl``, fsynced: the checkpoint), then ack it; a redelivered batch whose step is
already in the checkpoint is acked without training it again. Meanwhile ``--api-kills`` SIGKILLs
of ``run-api`` (restarted on the same data directory and port) and ``--trainer-kills`` SIGKILLs of
the trainer (restarted) are spread at random over the run. Then the pushers stop, the queue is
drained, and one line is printed:

    acknowledged A, delivered D, trained T, lost L, duplicated U

(``lost``: acknowledged but never trained; ``duplicated``: trained more than once). Exit status 1
when L or U is not 0.

    python bench/soak.py [--api-kills 20] [--trainer-kills 5] [--interval 4]
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Optional

import orjson
from subprocs import launch

from atroposlib.api.client import TrajectoryClient
from atroposlib.errors import APIError, APIUnavailable
from atroposlib.type_definitions import Registration
from atroposlib.utils.net import free_port

BATCH_SIZE, GROUP_SIZE = 4, 2


def group(gid: str) -> dict:
    rng = random.Random(gid)
    tokens = [[rng.randint(1, 500) for _ in range(16)] for _ in range(GROUP_SIZE)]
    return {
        "tokens": tokens,
        "masks": [[-100] * 4 + t[4:] for t in tokens],
        "scores": [1.0, 0.0],
        "group_id": gid,
    }


# ------------------------------------------------------------------------------------ trainer
def trainer_main(url: str, path: Path) -> None:
    """The trainer process: resumes from ``path`` (its checkpoint), pulls, trains, acks. Every
    batch received is also noted in ``delivered.txt`` next to it."""
    last_step = 0
    if path.exists():
        for line in path.read_bytes().splitlines():
            try:
                last_step = max(last_step, orjson.loads(line)["step"])
            except (orjson.JSONDecodeError, KeyError):
                pass  # a line torn by a kill: that batch was not trained
    out = open(path, "ab")
    seen = open(path.with_name("delivered.txt"), "ab", buffering=0)
    client = TrajectoryClient(url, retries=1, timeout=10)
    registered = False
    while True:
        try:
            if not registered:
                client.register(Registration(batch_size=BATCH_SIZE, max_token_len=64))
                registered = True
            b = client.get_batch()
            if not b.batch:
                time.sleep(0.05)
                continue
            seen.write(("\n".join(g["group_id"] for g in b.batch) + "\n").encode())
            if b.step > last_step:
                ids = [g["group_id"] for g in b.batch]
                out.write(orjson.dumps({"step": b.step, "ids": ids}) + b"\n")
                out.flush()
                os.fsync(out.fileno())
                last_step = b.step
            client.ack_batch(b.batch_id)
        except (APIUnavailable, APIError):
            time.sleep(0.1)


# ------------------------------------------------------------------------------------ harness
class Soak:
    def __init__(self, work: Path) -> None:
        self.work = work
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.api: Optional[subprocess.Popen] = None
        self.trainer: Optional[subprocess.Popen] = None
        self.acknowledged: set[str] = set()
        self.lock = threading.Lock()
        self.stop_pushing = threading.Event()
        self.trained_path = work / "trained.jsonl"
        self.delivered_log = work / "delivered.txt"

    def start_api(self) -> None:
        flags = ["--data-dir", str(self.work / "data"), "--store", "sqlite"]
        flags += ["--log-level", "warning"]
        flags.append("--resume")  # a restart after kill -9 continues the run (crash recovery)
        self.api = launch("atroposlib.cli.run_api", self.port, flags, self.work / "api.log", 60)

    def start_trainer(self) -> None:
        cmd = [sys.executable, __file__, "--trainer", self.url, str(self.trained_path)]
        log = open(self.work / "trainer.log", "ab")
        self.trainer = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)

    def pusher(self) -> None:
        client = TrajectoryClient(self.url, retries=1, timeout=10)
        while not self.stop_pushing.is_set():
            gid = uuid.uuid4().hex
            self.push(client, gid)
            time.sleep(0.01)
        client.close()

    def push(self, client: TrajectoryClient, gid: str) -> None:
        while True:  # the same group until it is acknowledged
            try:
                client.post_scored_data(group(gid))
                with self.lock:
                    self.acknowledged.add(gid)
                return
            except (APIUnavailable, APIError):
                time.sleep(0.05)

    @staticmethod
    def kill9(proc: Optional[subprocess.Popen]) -> None:
        if proc is not None and proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
            proc.wait(10)

    def run(self, api_kills: int, trainer_kills: int, interval: float, seed: int) -> str:
        rng = random.Random(seed)
        self.start_api()
        # the run starts when the trainer registers; pushers need no env registration
        self.start_trainer()
        pushers = [threading.Thread(target=self.pusher, daemon=True) for _ in range(3)]
        for t in pushers:
            t.start()
        events = ["api"] * api_kills + ["trainer"] * trainer_kills
        rng.shuffle(events)
        for what in events:
            time.sleep(rng.uniform(0.5, 1.5) * interval)
            if what == "api":
                self.kill9(self.api)
                time.sleep(rng.uniform(0.0, 0.5))
                self.start_api()
            else:
                self.kill9(self.trainer)
                time.sleep(rng.uniform(0.0, 0.5))
                self.start_trainer()
        self.stop_pushing.set()
        for t in pushers:
            t.join(60)
        return self.drain_and_count()

    def drain_and_count(self) -> str:
        with TrajectoryClient(self.url, retries=5) as c:
            if c.status().queued_sequences % BATCH_SIZE:
                self.push(c, "filler-" + uuid.uuid4().hex)  # complete the last batch
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline:
                st = c.status()
                if st.queue_size == 0 and st.pending_batch is None:
                    break
                time.sleep(0.2)
        time.sleep(0.5)
        self.kill9(self.trainer)
        self.kill9(self.api)
        trained: list[str] = []
        for line in self.trained_path.read_bytes().splitlines():
            try:
                trained += orjson.loads(line)["ids"]
            except (orjson.JSONDecodeError, KeyError):
                pass
        delivered = self.delivered_groups()
        acked = self.acknowledged
        lost = len(acked - set(trained))
        duplicated = len(trained) - len(set(trained))
        return (
            f"acknowledged {len(acked)}, delivered {len(delivered)}, trained {len(set(trained))}, "
            f"lost {lost}, duplicated {duplicated}"
        )

    def delivered_groups(self) -> set[str]:
        """Group ids the trainer received (in any batch, redeliveries included)."""
        if not self.delivered_log.exists():
            return set()
        return {x for x in self.delivered_log.read_text().split() if x}


def main(argv: Optional[list[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--api-kills", type=int, default=20)
    ap.add_argument("--trainer-kills", type=int, default=5)
    ap.add_argument("--interval", type=float, default=4.0, help="mean seconds between kills")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--trainer", nargs=2, metavar=("URL", "FILE"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.trainer:
        trainer_main(args.trainer[0], Path(args.trainer[1]))
        return 0
    work = Path(tempfile.mkdtemp(prefix="soak-"))
    soak = Soak(work)
    t0 = time.monotonic()
    try:
        line = soak.run(args.api_kills, args.trainer_kills, args.interval, args.seed)
    finally:
        soak.kill9(soak.trainer)
        soak.kill9(soak.api)
    print(line, flush=True)
    print(
        f"({args.api_kills} kill -9 of run-api, {args.trainer_kills} of the trainer, "
        f"{time.monotonic() - t0:.0f}s)",
        flush=True,
    )
    shutil.rmtree(work, ignore_errors=True)
    return 0 if line.endswith("lost 0, duplicated 0") else 1


if __name__ == "__main__":
    sys.exit(main())
