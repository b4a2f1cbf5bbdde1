"""Generation idle time per weight refresh: draining refreshes (before) against kept requests (after).

A real inference server (our engine, ``--server engine``, or the real vLLM CPU build, ``--server
vllm``; one server process) serves ``--clients`` streaming requests of ``--tokens`` tokens each,
back to back, while the trainer's refresh runs every ``--every`` seconds (our engine:
``/update_weights_from_disk`` of another checkpoint of the same shape; vLLM: ``/pause``, the worker
extension's reload, ``/reset_prefix_cache``, ``/update_weight_version``, ``/resume``, exactly as
``VLLMRoutes`` does). Every token arrives on a stream with its time, so the idle time is measured
where it happens: a gap in which no stream received a token, longer than ``--gap-factor`` x the
median gap, that overlaps a refresh, counts as idle (the gap less one median gap).

Each mode runs for ``--seconds``: engine ``drain`` (stop admitting rows, let the batch finish on the
old weights: what the engine did) and ``keep`` (swap between two decode steps); vLLM ``wait``
(``/pause?mode=wait``: what ``VLLMRoutes`` did) and ``keep`` (frozen, then resumed from the tokens
already generated). One line per mode:

    engine keep: 9 refreshes, idle 0.00 s per refresh (max 0.00), refresh call 0.41 s,
        rows kept across a refresh 36, 1650 tokens/s

    python bench/refresh_stall.py --server engine            # ~2 minutes
    python bench/refresh_stall.py --server vllm              # ~4 minutes with vLLM's start-up
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Optional

import httpx
from subprocs import launch, shut_down

from atroposlib.inference.tiny_model import build_tiny_model
from atroposlib.inference_clients.backends.vllm import VLLMRoutes
from atroposlib.utils.net import free_port

PROMPT = [5, 6, 7, 8, 9]


class Streams:
    """``clients`` threads, each streaming one completion after another; every token's arrival."""

    def __init__(self, url: str, model: str, clients: int, tokens: int) -> None:
        self.url, self.model, self.tokens = url, model, tokens
        self.arrivals: list[float] = []
        self.failures: list[str] = []
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.threads = [threading.Thread(target=self._loop, daemon=True) for _ in range(clients)]

    def _loop(self) -> None:
        body = {
            "model": self.model,
            "prompt": PROMPT,
            "max_tokens": self.tokens,
            "temperature": 1.0,
            "ignore_eos": True,
            "stream": True,
        }
        with httpx.Client(timeout=600) as http:
            while not self.stop.is_set():
                try:
                    with http.stream("POST", self.url + "/v1/completions", json=body) as r:
                        r.raise_for_status()
                        pending = b""
                        for chunk in r.iter_bytes():
                            *lines, pending = (pending + chunk).split(b"\n")
                            now = time.monotonic()
                            for line in lines:
                                if line.startswith(b"data: {") and b'"text"' in line:
                                    with self.lock:
                                        self.arrivals.append(now)
                except httpx.HTTPError as e:
                    self.failures.append(repr(e))
                    time.sleep(0.5)

    def __enter__(self) -> Streams:
        for t in self.threads:
            t.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop.set()
        for t in self.threads:
            t.join(600)


def idle_per_refresh(
    arrivals: list[float], windows: list[tuple[float, float]], factor: float
) -> list[float]:
    """For each refresh window: the stream silence it caused (gaps longer than ``factor`` x the
    median gap that overlap the window, less one median gap each)."""
    times = sorted(arrivals)
    gaps = [(a, b) for a, b in zip(times, times[1:], strict=False) if b > a]
    if not gaps:
        return [0.0 for _ in windows]
    median = statistics.median(b - a for a, b in gaps)
    out = []
    for start, end in windows:
        idle = sum(
            (b - a) - median for a, b in gaps if (b - a) > factor * median and a < end and b > start
        )
        out.append(idle)
    return out


def run_mode(
    url: str,
    model: str,
    refresh: Callable[[int], None],
    args: argparse.Namespace,
    rows_kept: Callable[[], Optional[float]],
) -> dict[str, Any]:
    windows: list[tuple[float, float]] = []
    kept_before = rows_kept()
    with Streams(url, model, args.clients, args.tokens) as streams:
        time.sleep(args.every)  # the streams are running
        start = time.monotonic()
        version = 1
        while time.monotonic() - start < args.seconds:
            t0 = time.monotonic()
            refresh(version)
            windows.append((t0, time.monotonic()))
            version += 1
            time.sleep(max(0.0, args.every - (time.monotonic() - t0)))
        span = time.monotonic() - start
        arrivals = [a for a in streams.arrivals if a >= start]
    idle = idle_per_refresh(arrivals, windows, args.gap_factor)
    kept_after = rows_kept()
    return {
        "refreshes": len(windows),
        "idle_mean": sum(idle) / max(len(idle), 1),
        "idle_max": max(idle, default=0.0),
        "call_s": sum(b - a for a, b in windows) / max(len(windows), 1),
        "tokens_per_s": len(arrivals) / span,
        "kept": None if kept_before is None else (kept_after or 0) - kept_before,
        "failures": len(streams.failures),
    }


def report(server: str, mode: str, r: dict[str, Any]) -> None:
    kept = f", rows kept across a refresh {r['kept']:.0f}" if r["kept"] is not None else ""
    print(
        f"{server} {mode}: {r['refreshes']} refreshes, idle {r['idle_mean']:.2f} s per refresh "
        f"(max {r['idle_max']:.2f}), refresh call {r['call_s']:.2f} s{kept}, "
        f"{r['tokens_per_s']:.0f} tokens/s, {r['failures']} failed request(s)",
        flush=True,
    )


def engine_runs(args: argparse.Namespace, tmp: Path) -> None:
    models = [build_tiny_model(tmp / f"m{i}", seed=i) for i in range(2)]
    for mode in ("drain", "keep"):
        port = free_port()
        url = f"http://127.0.0.1:{port}"
        proc = launch(
            "atroposlib.cli.serve_model",
            port,
            ["--model", str(models[0]), "--served-model-name", "tiny", "--refresh-mode", mode],
            log=tmp / f"engine-{mode}.log",
        )
        try:

            def refresh(version: int, url: str = url) -> None:
                body = {"model_path": str(models[version % 2]), "weight_version": str(version)}
                r = httpx.post(url + "/update_weights_from_disk", json=body, timeout=600)
                r.raise_for_status()

            def kept(url: str = url) -> Optional[float]:
                text = httpx.get(url + "/metrics", timeout=30).text
                for line in text.split("\n"):
                    if line.startswith("atropos_inference_rows_across_refresh_total"):
                        return float(line.split()[-1])
                return 0.0

            report("engine", mode, run_mode(url, "tiny", refresh, args, kept))
        finally:
            shut_down(proc)


def vllm_runs(args: argparse.Namespace, tmp: Path) -> None:
    from atroposlib.inference.vllm_launch import find_vllm_python, vllm_server

    python = find_vllm_python()
    if python is None:
        raise SystemExit("no vLLM: run scripts/setup_vllm.sh or set ATROPOS_VLLM_PYTHON")
    models = [build_tiny_model(tmp / f"m{i}", seed=i) for i in range(2)]
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    server = vllm_server(str(models[0]), port, python=python, max_model_len=512, dev_mode=True)
    env = server.full_env()
    env["VLLM_CACHE_ROOT"] = str(tmp / "vllm-cache")
    log = open(tmp / "vllm.log", "wb")
    proc = subprocess.Popen(
        server.argv, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True
    )
    try:
        deadline = time.monotonic() + 900
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise SystemExit("vLLM exited; see " + str(tmp / "vllm.log"))
            try:
                if httpx.get(url + "/health", timeout=5).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            time.sleep(1)
        name = httpx.get(url + "/v1/models").json()["data"][0]["id"]
        for mode in ("wait", "keep"):
            routes = VLLMRoutes()
            routes.PAUSE_MODE = mode

            def refresh(version: int, routes: VLLMRoutes = routes) -> None:
                with httpx.Client(timeout=600) as http:
                    routes.reload_from_disk(http, url, str(models[version % 2]), version)

            report("vllm", mode, run_mode(url, name, refresh, args, lambda: None))
    finally:
        try:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(60)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            os.killpg(proc.pid, signal.SIGKILL)
        log.close()


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--server", choices=["engine", "vllm"], default="engine")
    p.add_argument("--clients", type=int, default=4, help="concurrent streaming requests")
    p.add_argument("--tokens", type=int, default=256, help="tokens per request (long: it matters)")
    p.add_argument("--seconds", type=float, default=40.0, help="measured time per mode")
    p.add_argument("--every", type=float, default=4.0, help="seconds between refreshes")
    p.add_argument("--gap-factor", type=float, default=5.0, help="a gap this x the median is idle")
    args = p.parse_args()
    with tempfile.TemporaryDirectory(prefix="refresh-stall-") as d:
        (engine_runs if args.server == "engine" else vllm_runs)(args, Path(d))
    return 0


if __name__ == "__main__":
    sys.exit(main())
