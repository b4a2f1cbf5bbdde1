"""Fair multi-env batches: two real env processes whose speeds differ 10x, equal shares asked.

Each run starts a fresh ``run-api`` (memory store) and real env processes (``bench/timed_env.py``:
the real runtime, generation replaced by a sleep, so an env's speed is exactly what is asked), and
plays the trainer in this process: pull a batch, "train" it for ``--step-seconds``, acknowledge it.

1. **baseline**: the slow env alone; its throughput (sequences per second delivered) is what "the
   slow env alone can feed".
2. **shares**: the slow and the fast env (10x faster), equal shares asked (``--shares allocation``:
   ``--env.min_batch_allocation 0.5`` each; ``weight``: ``run-api --batch-shares weight`` with equal
   weights; ``none``: no shares, first come first served, for comparison). Over ``--batches``
   batches it measures each env's share of the sequences, the throughput, and reads ``/status``: the
   groups dropped for age and each env's groups received and delivered. The first ``--warmup``
   batches are not measured: the envs join one after the other, and groups the first one queued
   for a whole batch then wait twice as many steps for its half (drops there are reported apart).

One line per run, then the verdict against the targets (each share within 5 points of 0.5,
throughput >= 80% of the baseline, 0 groups dropped for age); exit 1 when one is missed (not with
``--shares none``, which shows the problem).

    python bench/multi_env_shares.py                     # the full run: 20 batches (~2 minutes)
    python bench/multi_env_shares.py --batches 5         # a short check
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Optional

from subprocs import launch, running, shut_down

from atroposlib.api.client import TrajectoryClient
from atroposlib.errors import APIError
from atroposlib.type_definitions import Registration
from atroposlib.utils.net import free_port

HERE = Path(__file__).resolve().parent
BATCH_SIZE, GROUP_SIZE = 16, 4


def start_env(
    api: str, name: str, seconds: float, share: Optional[float], tmp: Path
) -> subprocess.Popen:
    flags = [
        "serve",
        "--env.rollout_server_url",
        api,
        "--env.seconds_per_group",
        str(seconds),
        "--env.wandb_name",
        name,
        "--env.spool_dir",
        str(tmp / f"spool-{name}"),
        "--env.group_size",
        str(GROUP_SIZE),
    ]
    if share is not None:
        flags += ["--env.min_batch_allocation", str(share)]
    log = open(tmp / f"{name}.log", "ab")
    return subprocess.Popen(
        [sys.executable, str(HERE / "timed_env.py"), *flags], stdout=log, stderr=subprocess.STDOUT
    )


def wait_registered(client: TrajectoryClient, env_id: int, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            client.status_env(env_id)
            return
        except APIError:
            time.sleep(0.2)
    raise SystemExit(f"env {env_id} did not register within {timeout:.0f}s")


def run(
    envs: list[tuple[str, float, Optional[float]]],
    api_flags: list[str],
    batches: int,
    warmup: int,
    step_seconds: float,
    tmp: Path,
) -> dict:
    """Start run-api and ``envs`` (name, seconds per group, share), train ``warmup + batches``
    batches; the measured figures of the last ``batches``."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    api = launch(
        "atroposlib.cli.run_api", port, ["--store", "memory", *api_flags], log=tmp / "api.log"
    )
    with running() as procs, TrajectoryClient(url, timeout=30.0) as client:
        procs.append(api)
        client.register(Registration(batch_size=BATCH_SIZE, max_token_len=64, num_steps=100_000))
        client.get_batch()  # the trainer has started: envs may register
        for i, (name, seconds, share) in enumerate(envs):
            procs.append(start_env(url, name, seconds, share, tmp))
            wait_registered(client, i)
        by_env: Counter[int] = Counter()
        t0 = None
        dropped_before = 0
        done = 0
        while done < warmup + batches:
            resp = client.get_batch()
            if not resp.batch:
                time.sleep(0.02)
                continue
            if done == warmup:
                t0 = time.monotonic()
                dropped_before = sum(client.status().stale_dropped_by_env.values())
            if done >= warmup:
                for g in resp.batch:
                    by_env[g.get("env_id")] += len(g["tokens"])
            time.sleep(step_seconds)
            if resp.batch_id:
                client.ack_batch(resp.batch_id)
            done += 1
        assert t0 is not None
        seconds = time.monotonic() - t0
        status = client.status()
        shut_down(*procs[1:])
    total = sum(by_env.values())
    return {
        "seq_per_s": total / seconds,
        "shares": {
            envs[i][0]: n / total for i, n in sorted((k or 0, v) for k, v in by_env.items())
        },
        "stale_dropped": sum(status.stale_dropped_by_env.values()) - dropped_before,
        "stale_dropped_warmup": dropped_before,
        # (an older run-api answers no groups_by_env: the comparison still runs)
        "groups_by_env": dict(status.model_dump().get("groups_by_env") or {}),
        "seconds": seconds,
    }


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--batches", type=int, default=20, help="batches measured per run")
    p.add_argument("--warmup", type=int, default=10, help="batches not measured, first")
    p.add_argument("--slow-seconds", type=float, default=0.4, help="seconds per group, slow env")
    p.add_argument("--speedup", type=float, default=10.0, help="how much faster the fast env is")
    p.add_argument("--step-seconds", type=float, default=0.2, help="the trainer's time per step")
    p.add_argument("--shares", choices=["allocation", "weight", "none"], default="allocation")
    args = p.parse_args()
    slow, fast = args.slow_seconds, args.slow_seconds / args.speedup
    with tempfile.TemporaryDirectory(prefix="shares-") as d:
        tmp = Path(d)
        (tmp / "a").mkdir()
        base = run(
            [("slow", slow, None)], [], args.batches, args.warmup, args.step_seconds, tmp / "a"
        )
        print(
            f"baseline (slow env alone): {base['seq_per_s']:.1f} sequences/s over "
            f"{args.batches} batches, {base['stale_dropped']} dropped for age",
            flush=True,
        )
        share = 0.5 if args.shares == "allocation" else None
        api_flags = ["--batch-shares", "weight"] if args.shares == "weight" else []
        (tmp / "b").mkdir()
        both = run(
            [("slow", slow, share), ("fast", fast, share)],
            api_flags,
            args.batches,
            args.warmup,
            args.step_seconds,
            tmp / "b",
        )
    ratio = both["seq_per_s"] / base["seq_per_s"]
    shares = both["shares"]
    print(
        f"shares={args.shares}, fast env {args.speedup:g}x faster: slow {shares.get('slow', 0):.3f}, "
        f"fast {shares.get('fast', 0):.3f} of the sequences; {both['seq_per_s']:.1f} sequences/s "
        f"= {ratio:.2f}x the slow env alone; {both['stale_dropped']} dropped for age "
        f"({both['stale_dropped_warmup']} while the envs joined, in the warm-up); "
        f"per env (received/delivered): "
        + ", ".join(
            f"{k} {v['received']}/{v['delivered']}" for k, v in both["groups_by_env"].items()
        ),
        flush=True,
    )
    if args.shares == "none":
        return 0
    misses = []
    if any(abs(shares.get(n, 0.0) - 0.5) > 0.05 for n in ("slow", "fast")):
        misses.append("a share is more than 5 points from 0.5")
    if ratio < 0.8:
        misses.append(f"throughput {ratio:.2f}x < 0.8x the slow env alone")
    if both["stale_dropped"]:
        misses.append(f"{both['stale_dropped']} groups dropped for age")
    print("targets met" if not misses else "MISSED: " + "; ".join(misses))
    return 1 if misses else 0


if __name__ == "__main__":
    sys.exit(main())
