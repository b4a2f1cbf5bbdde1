"""Start a throw-away ``run-api`` for a test (Atropos's ``launch_api_for_testing``; Atropos's path
``atroposlib.tests.api_test_utils`` re-exports it).

The server runs as a subprocess on ``localhost:port`` with the in-memory store, so a test never
resumes another run's data; stop it with ``proc.terminate()``.
"""

from __future__ import annotations

import subprocess
import sys
import time

import httpx


def check_api_running(port: int = 8000) -> bool:
    """Whether ``GET /info`` answers 200 on ``localhost:port``."""
    try:
        return httpx.get(f"http://localhost:{port}/info", timeout=2.0).status_code == 200
    except httpx.HTTPError:
        return False


def launch_api_for_testing(max_wait_for_api: int = 10, port: int = 8000) -> subprocess.Popen:
    """Start ``run-api`` and wait up to ``max_wait_for_api`` seconds for it; raises
    ``TimeoutError`` (with the server's stderr) when it does not come up."""
    cmd = [sys.executable, "-m", "atroposlib.cli.run_api", "--host", "localhost"]
    cmd += ["--port", str(port), "--store", "memory"]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + max_wait_for_api
    while not check_api_running(port):
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.terminate()
            err = proc.communicate(timeout=10)[1].decode(errors="replace")[-500:]
            raise TimeoutError(f"API server did not start in time: {err}")
        time.sleep(0.25)
    return proc


__all__ = ["check_api_running", "launch_api_for_testing"]
