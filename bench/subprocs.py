"""The servers a benchmark starts: a real ``run-api`` or ``atropos-serve-model`` subprocess.

    proc = launch("atroposlib.cli.run_api", port, ["--store", "memory"], timeout=60)
    try:
        ...  # talk to http://127.0.0.1:{port}
    finally:
        shut_down(proc)

    with running() as procs:  # several: each one still running is shut down at the end
        procs.append(launch("atroposlib.cli.serve_model", port, ["--model", model_dir]))

The benchmarks run as scripts (``python bench/x.py``), so this folder is on ``sys.path``.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Optional

from atroposlib.utils.net import wait_for_http


def launch(
    module: str,
    port: int,
    flags: Sequence[str] = (),
    log: Optional[Path] = None,
    timeout: float = 180.0,
) -> subprocess.Popen:
    """``python -m module --port port *flags``, once it answers ``GET /health``. Its output is
    appended to ``log`` (discarded without one); it is stopped again when it does not come up."""
    out = open(log, "ab") if log is not None else subprocess.DEVNULL
    cmd = [sys.executable, "-m", module, "--port", str(port), *flags]
    proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT)
    try:
        wait_for_http(f"http://127.0.0.1:{port}/health", timeout=timeout, proc=proc)
    except BaseException:
        shut_down(proc)
        raise
    return proc


@contextmanager
def running() -> Iterator[list[subprocess.Popen]]:
    """A list to add started processes to; those still running are shut down when the block ends."""
    procs: list[subprocess.Popen] = []
    try:
        yield procs
    finally:
        shut_down(*procs)


def shut_down(*procs: Optional[subprocess.Popen], grace: float = 30.0) -> None:
    """Terminate each process that still runs and wait for it (killed after ``grace`` seconds);
    None (a process that was never started) is skipped."""
    for proc in procs:
        if proc is not None and proc.poll() is None:
            proc.terminate()
            wait_or_kill(proc, grace)


def wait_or_kill(proc: subprocess.Popen, timeout: float) -> bool:
    """Wait up to ``timeout`` seconds for ``proc`` to end, else kill it (and reap it); True when it
    ended by itself."""
    try:
        proc.wait(timeout)
        return True
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        return False


__all__ = ["launch", "running", "shut_down", "wait_or_kill"]
