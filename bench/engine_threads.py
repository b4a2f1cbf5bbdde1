"""The engine's default torch threads under contention: default vs all cores, and batching's gain.

Builds a tiny (~0.86M-parameter) model and starts two real `atropos-serve-model` processes on it: one
with `--torch-threads <all cores>` (the old default) and one with no thread flag (the default).
Optionally `--load N` busy-loop processes run alongside, as an env, the API or a trainer would on a
shared machine. Each server then gets, in interleaved rounds, 16 sequential requests (one client)
and 16 concurrent requests (16 clients, one request each) of `--max-tokens` tokens (temperature 1,
ignore_eos). Printed: wall time and tokens/s per case, the default's sequential speed against
all cores' (the contention ratio), and the concurrent/sequential speed-up of each server (target:
>= 5x with the default).

Usage: python bench/engine_threads.py [--load 1] [--max-tokens 32] [--rounds 2]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
from subprocs import launch, running

from atroposlib.inference.config import default_torch_threads
from atroposlib.utils.net import free_port

N_REQUESTS = 16
BUSY = "import time\nend = time.time() + 3600\nwhile time.time() < end: pass\n"


def start_server(model: Path, threads: int | None, log: Path) -> tuple[subprocess.Popen, str]:
    port = free_port()
    flags = ["--model", str(model), "--log-level", "warning"]
    if threads is not None:
        flags += ["--torch-threads", str(threads)]
    return launch("atroposlib.cli.serve_model", port, flags, log), f"http://127.0.0.1:{port}"


def one_request(url: str, seed: int, max_tokens: int) -> int:
    r = httpx.post(
        url + "/v1/completions",
        timeout=600,
        json={
            "prompt": f"What is {seed % 10} + {seed % 7}? Answer:",
            "max_tokens": max_tokens,
            "temperature": 1.0,
            "ignore_eos": True,
            "seed": seed,
        },
    )
    r.raise_for_status()
    return int(r.json()["usage"]["completion_tokens"])


def sequential(url: str, max_tokens: int) -> tuple[float, int]:
    t0 = time.perf_counter()
    tokens = sum(one_request(url, i, max_tokens) for i in range(N_REQUESTS))
    return time.perf_counter() - t0, tokens


def concurrent(url: str, max_tokens: int) -> tuple[float, int]:
    t0 = time.perf_counter()
    with ThreadPoolExecutor(N_REQUESTS) as pool:
        tokens = sum(pool.map(lambda i: one_request(url, i, max_tokens), range(N_REQUESTS)))
    return time.perf_counter() - t0, tokens


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--load", type=int, default=1, help="busy-loop processes running alongside")
    ap.add_argument("--max-tokens", type=int, default=32)
    ap.add_argument("--rounds", type=int, default=2, help="interleaved measurement rounds")
    args = ap.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    cores = os.cpu_count() or 1
    print(
        f"cpu cores={cores}; all-cores server: --torch-threads {cores}; default server: "
        f"{default_torch_threads()} thread(s); busy processes alongside: {args.load}"
    )
    with tempfile.TemporaryDirectory() as tmp:
        tmpd = Path(tmp)
        from atroposlib.inference.tiny_model import build_tiny_model

        model = build_tiny_model(tmpd / "tiny", seed=0)
        with running() as procs:
            servers = {}
            for name, threads in (("all cores", cores), ("default", None)):
                proc, url = start_server(model, threads, tmpd / f"{name}.log")
                procs.append(proc)
                servers[name] = url
                concurrent(url, 4)  # warm-up
            for _ in range(args.load):
                procs.append(subprocess.Popen([sys.executable, "-c", BUSY]))
            time.sleep(1.0)
            totals = {(n, k): [0.0, 0] for n in servers for k in ("seq", "conc")}
            for _ in range(args.rounds):
                for name, url in servers.items():
                    for kind, fn in (("seq", sequential), ("conc", concurrent)):
                        secs, tokens = fn(url, args.max_tokens)
                        totals[(name, kind)][0] += secs
                        totals[(name, kind)][1] += tokens
            tps = {}
            for (name, kind), (secs, tokens) in totals.items():
                tps[(name, kind)] = tokens / secs
                label = "16 sequential" if kind == "seq" else "16 concurrent"
                print(
                    f"{name:9s} {label}: {secs / args.rounds:6.2f} s per 16 requests, "
                    f"{tokens / secs:7.0f} tok/s"
                )
            for name in servers:
                ratio = tps[(name, "conc")] / tps[(name, "seq")]
                print(f"{name:9s} concurrent / sequential speed: {ratio:5.2f}x")
            print(
                "default / all cores, sequential speed under this load: "
                f"{tps[('default', 'seq')] / tps[('all cores', 'seq')]:5.2f}x"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
