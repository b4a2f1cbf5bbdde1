"""Run untrusted Python (model-written code) in a limited subprocess.

What is enforced, and how:

* **time** — wall-clock timeout; the whole process group is SIGKILLed when it passes. RLIMIT_CPU backs it.
* **memory** — RLIMIT_AS (address space) of ``memory_mb``.
* **processes** — RLIMIT_NPROC of ``max_processes``. The kernel ignores it for root, so when we run as
  root the child also drops to an unprivileged uid of its own (a fresh one per run from a high range
  with no account, so one run's leftover processes never count against the next run's limit), if an
  interpreter that such a user can execute exists; it then cannot write outside its temp dir either.
* **files** — a fresh temp dir as working dir and HOME (deleted afterwards); RLIMIT_FSIZE caps each file,
  including the captured stdout/stderr; RLIMIT_NOFILE caps open files; no core dumps.
* **network** — when the kernel allows it (root, or unprivileged user namespaces), the child gets its
  own empty network namespace (``unshare(CLONE_NEWNET)``): no interface but a down loopback, so no
  connection is possible. Always, a launcher script replaces ``socket.socket``/``create_connection``
  with a function that raises; that alone is a speed bump, not a wall (code can re-import ``_socket``).
  The launcher then runs the code (a separate ``main.py``) with ``runpy``, so code that does not even
  compile is the code's failure (``failed: SyntaxError``), never the sandbox's.
  ``require_network_isolation=True`` makes a missing namespace an infrastructure failure instead.

Outcomes: ``passed`` (exit 0), ``failed`` (non-zero exit, exception, MemoryError), ``timeout``, and
``unavailable`` when the sandbox itself could not run the code (no interpreter, fork failure, the launcher
never ran) — environments turn that into ``reward_status="unavailable"``, never a 0 reward.
"""

from __future__ import annotations

import ctypes
import itertools
import logging
import os
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from functools import lru_cache
from typing import Literal, Optional

logger = logging.getLogger(__name__)

SandboxStatus = Literal["passed", "failed", "timeout", "unavailable"]
_CLONE_NEWNET = 0x40000000
_SANDBOX_UIDS = itertools.cycle(range(200_000, 260_000))
_UID_LOCK = threading.Lock()
_MARKER = ".sandbox-started"
_PROGRAM = "main.py"  # the code under test; the launcher runs it, so its syntax errors are its own failures
_OUTPUT_LIMIT = 64 * 1024
# Resolved once in the parent: after fork() the child must not dlopen() (it could deadlock on a lock
# another thread of the parent held at fork time).
_LIBC = ctypes.CDLL(None, use_errno=True)

_PRELUDE = f"""\
import socket as _socket
def _no_network(*args, **kwargs):
    raise OSError("network access is disabled in this sandbox")
_socket.socket = _no_network
_socket.create_connection = _no_network
_socket.socketpair = _no_network
open({_MARKER!r}, "w").close()
del _socket, _no_network
import runpy as _runpy
_runpy.run_path({_PROGRAM!r}, run_name="__main__")
"""


@dataclass
class SandboxLimits:
    """Limits for one run (see the module docstring for how each is enforced)."""

    timeout_s: float = 10.0
    memory_mb: int = 1024
    max_processes: int = 32
    max_file_mb: int = 16
    max_open_files: int = 64
    require_network_isolation: bool = False


@dataclass
class SandboxResult:
    status: SandboxStatus
    returncode: Optional[int]
    stdout: str
    stderr: str
    duration_s: float
    detail: str
    network_isolated: bool


@dataclass(frozen=True)
class _Plan:
    interpreter: str
    drop_privileges: bool
    new_netns: bool


def _next_uid() -> int:
    with _UID_LOCK:
        return next(_SANDBOX_UIDS)


def _preexec(limits: SandboxLimits, plan: _Plan, uid: int) -> None:
    """Runs in the forked child before exec: new session, namespace, limits, then drop privileges."""
    os.setsid()
    if plan.new_netns:
        if _LIBC.unshare(_CLONE_NEWNET) != 0:
            raise OSError(ctypes.get_errno(), "unshare(CLONE_NEWNET) failed")
    cpu = int(limits.timeout_s) + 2
    for limit, value in (
        (resource.RLIMIT_AS, limits.memory_mb * 1024 * 1024),
        (resource.RLIMIT_CPU, cpu),
        (resource.RLIMIT_NPROC, limits.max_processes),
        (resource.RLIMIT_FSIZE, limits.max_file_mb * 1024 * 1024),
        (resource.RLIMIT_NOFILE, limits.max_open_files),
        (resource.RLIMIT_CORE, 0),
    ):
        resource.setrlimit(limit, (value, value))
    if plan.drop_privileges:
        os.setgroups([])
        os.setgid(uid)
        os.setuid(uid)


def _execute(code: str, limits: SandboxLimits, plan: _Plan) -> SandboxResult:
    start = time.monotonic()
    workdir = tempfile.mkdtemp(prefix="sandbox-")
    try:
        script = os.path.join(workdir, "launcher.py")
        program = os.path.join(workdir, _PROGRAM)
        with open(script, "w", encoding="utf-8") as handle:
            handle.write(_PRELUDE)
        with open(program, "w", encoding="utf-8", errors="surrogatepass") as handle:
            handle.write(code)
        out_path, err_path = os.path.join(workdir, "stdout"), os.path.join(workdir, "stderr")
        uid = _next_uid()
        if plan.drop_privileges:
            for path in (workdir, script, program):
                os.chown(path, uid, uid)
        env = {
            "PATH": "/usr/bin:/bin",
            "HOME": workdir,
            "PYTHONDONTWRITEBYTECODE": "1",
            "PYTHONHASHSEED": "0",
            "SANDBOX_NO_NETWORK": "1",
        }
        with open(out_path, "wb") as out, open(err_path, "wb") as err:
            try:
                proc = subprocess.Popen(
                    [plan.interpreter, "-I", script],
                    cwd=workdir,
                    env=env,
                    stdin=subprocess.DEVNULL,
                    stdout=out,
                    stderr=err,
                    preexec_fn=lambda: _preexec(limits, plan, uid),
                )
            except (OSError, subprocess.SubprocessError) as exc:
                return SandboxResult(
                    "unavailable",
                    None,
                    "",
                    "",
                    time.monotonic() - start,
                    f"could not start the sandbox: {exc}",
                    plan.new_netns,
                )
            timed_out = False
            try:
                proc.wait(timeout=limits.timeout_s)
            except subprocess.TimeoutExpired:
                timed_out = True
            finally:
                try:  # kill the group either way: nothing the code spawned may outlive it
                    os.killpg(proc.pid, signal.SIGKILL)
                except ProcessLookupError:  # the group is already gone: nothing left to kill
                    pass
                proc.wait()
        stdout = _read_capped(out_path)
        stderr = _read_capped(err_path)
        duration = time.monotonic() - start
        if not os.path.exists(os.path.join(workdir, _MARKER)):
            return SandboxResult(
                "unavailable",
                proc.returncode,
                stdout,
                stderr,
                duration,
                "the interpreter did not start the program",
                plan.new_netns,
            )
        cpu_killed = proc.returncode in (-signal.SIGXCPU, -signal.SIGKILL)
        if timed_out or cpu_killed:
            return SandboxResult(
                "timeout",
                proc.returncode,
                stdout,
                stderr,
                duration,
                f"killed after {limits.timeout_s:g}s",
                plan.new_netns,
            )
        if proc.returncode == 0:
            return SandboxResult("passed", 0, stdout, stderr, duration, "exit 0", plan.new_netns)
        last_line = stderr.strip().splitlines()[-1] if stderr.strip() else f"exit {proc.returncode}"
        return SandboxResult(
            "failed", proc.returncode, stdout, stderr, duration, last_line, plan.new_netns
        )
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def _read_capped(path: str) -> str:
    with open(path, "rb") as handle:
        return handle.read(_OUTPUT_LIMIT).decode("utf-8", errors="replace")


def _candidate_interpreters() -> list[str]:
    found = [sys.executable]
    for name in ("/usr/bin/python3", "/usr/local/bin/python3"):
        if os.path.exists(name) and os.path.realpath(name) != os.path.realpath(sys.executable):
            found.append(name)
    return found


@lru_cache(maxsize=1)
def _plan() -> _Plan:
    """Probe once what this machine allows (network namespace, dropping privileges); pick a plan."""
    probe = SandboxLimits(timeout_s=20)
    is_root = os.geteuid() == 0
    for new_netns in (True, False):
        for drop in (True, False) if is_root else (False,):
            for interpreter in _candidate_interpreters() if drop else [sys.executable]:
                plan = _Plan(interpreter, drop, new_netns)
                if _execute("pass", probe, plan).status == "passed":
                    logger.info(
                        "sandbox: interpreter %s, network namespace %s, runs as %s",
                        interpreter,
                        "yes" if new_netns else "NO (socket guard only)",
                        "a fresh unprivileged uid" if drop else "the current user",
                    )
                    return plan
    raise RuntimeError("the sandbox cannot start any Python interpreter on this machine")


def sandbox_capabilities() -> dict:
    """What the sandbox enforces on this machine (for logs, tests and the README)."""
    plan = _plan()
    return {
        "interpreter": plan.interpreter,
        "network_namespace": plan.new_netns,
        "drops_privileges": plan.drop_privileges,
        "process_limit_enforced": plan.drop_privileges or os.geteuid() != 0,
    }


def run_python(code: str, limits: Optional[SandboxLimits] = None) -> SandboxResult:
    """Run ``code`` under ``limits``; never raises for a failure of the code or of the sandbox."""
    limits = limits or SandboxLimits()
    try:
        plan = _plan()
    except RuntimeError as exc:
        return SandboxResult("unavailable", None, "", "", 0.0, str(exc), False)
    if limits.require_network_isolation and not plan.new_netns:
        return SandboxResult(
            "unavailable",
            None,
            "",
            "",
            0.0,
            "network isolation required but no network namespace is available",
            False,
        )
    try:
        return _execute(code, limits, plan)
    except OSError as exc:  # temp dir, chown, pipes: the machine, not the code
        logger.exception("sandbox infrastructure failure")
        return SandboxResult(
            "unavailable", None, "", "", 0.0, f"sandbox failure: {exc}", plan.new_netns
        )
