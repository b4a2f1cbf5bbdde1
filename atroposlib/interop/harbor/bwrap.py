"""One command in a bubblewrap sandbox, under limits: what the host sandbox runs for every command.

The sandbox (``bwrap_argv``): a fresh root on a tmpfs made read-only, with the host's ``/usr`` and
``/etc`` bound read-only (``/bin``, ``/lib``... as on the host: links into ``/usr`` or read-only
binds), a private ``/dev`` and ``/proc``, and the trial's own folders bound read-write at their
places (``/app``, ``/logs``, ``/tests``, ``/tmp``...: ``mounts``). Every namespace is new
(``--unshare-all``): no network but a loopback of its own, no other process visible, its own host
name; the command runs as uid 1000 inside, in a new session, and dies with its parent.

The limits (``run_limited``): the process runs as a host uid of its own when we are root (``user``:
a fresh unprivileged uid for each trial, so nothing it does counts against, or can touch, another
trial: ``setpriv``), with resource limits on address space, processes and file size, and no core
dumps (``prlimit``); its output (stdout and stderr together, in order) is kept up to
``max_output_bytes`` and the rest counted; past
``timeout_s`` the whole process group is killed (SIGKILL), and with bubblewrap's process namespace
every process the command started dies with it, daemons and ``setsid`` children included.

Standard library only (Harbor's Python imports it through the host-sandbox backend).
"""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

SANDBOX_UID = 1000  # the uid and gid the command sees inside
PATH = "/usr/local/bin:/usr/local/sbin:/usr/bin:/usr/sbin:/bin:/sbin"
_SYSTEM_LINKS = ("bin", "sbin", "lib", "lib32", "lib64", "libx32")
_KILL_GRACE_S = 5.0  # after SIGKILL, how long the pipe may take to close


@dataclass(frozen=True)
class CommandLimits:
    """What one command may use."""

    timeout_s: float = 10.0
    max_output_bytes: int = 4096
    memory_mb: int = 2048
    max_processes: int = 256
    max_file_mb: int = 64


@dataclass(frozen=True)
class CommandResult:
    """How a command ended: its exit code (None when it was killed at its time limit), its output
    (the first ``max_output_bytes``), how many bytes of output were left out, and how long it ran."""

    exit_code: Optional[int]
    output: str
    timed_out: bool = False
    truncated_bytes: int = 0
    duration_s: float = 0.0


def missing_bwrap() -> Optional[str]:
    """One line naming what is missing for the host sandbox, or None."""
    if shutil.which("bwrap") is None:
        return "the host sandbox needs bubblewrap: install the Debian package bubblewrap (apt-get install bubblewrap)"
    if shutil.which("prlimit") is None or shutil.which("setpriv") is None:
        return "the host sandbox needs prlimit and setpriv: install the Debian package util-linux"
    return None


def _system_args() -> list[str]:
    args = ["--ro-bind", "/usr", "/usr", "--ro-bind", "/etc", "/etc"]
    for name in _SYSTEM_LINKS:
        host = Path("/") / name
        if host.is_symlink():
            args += ["--symlink", os.readlink(host), f"/{name}"]
        elif host.is_dir():
            args += ["--ro-bind", str(host), f"/{name}"]
    return args + ["--dev", "/dev", "--proc", "/proc"]


def bwrap_argv(
    mounts: Mapping[str, Path],
    command: str,
    cwd: str,
    env: Mapping[str, str],
    limits: CommandLimits,
) -> list[str]:
    """The bubblewrap command line running ``bash -c command`` with
    ``mounts`` (sandbox path -> host folder) bound read-write, in ``cwd``, with exactly ``env`` (on
    top of ``PATH``, ``HOME=/tmp`` and ``LANG``)."""
    argv = ["bwrap", *_system_args()]
    for target in sorted(mounts, key=lambda t: t.count("/")):
        argv += ["--bind", str(mounts[target]), target]
    argv += [
        "--remount-ro",
        "/",
        "--unshare-all",
        "--hostname",
        "sandbox",
        "--die-with-parent",
        "--new-session",
        "--uid",
        str(SANDBOX_UID),
        "--gid",
        str(SANDBOX_UID),
        "--chdir",
        cwd,
        "--clearenv",
    ]
    for key, value in {"PATH": PATH, "HOME": "/tmp", "LANG": "C.UTF-8", **env}.items():
        argv += ["--setenv", key, value]
    return argv + ["--", "/bin/bash", "-c", command]


async def _drain(stream: asyncio.StreamReader, keep: int) -> tuple[bytes, int]:
    """Read ``stream`` to its end; (the first ``keep`` bytes, how many more there were)."""
    kept, dropped = bytearray(), 0
    while chunk := await stream.read(65536):
        room = max(0, keep - len(kept))
        kept += chunk[:room]
        dropped += len(chunk) - min(room, len(chunk))
    return bytes(kept), dropped


def _launcher(limits: CommandLimits, user: Optional[int]) -> list[str]:
    """What runs bubblewrap: ``setpriv`` to the trial's uid (when given), then ``prlimit`` with the
    caps (lowering a limit needs no privilege). Small programs exec'd in turn are cheaper than a
    Python ``preexec_fn``, which makes a large parent (an env with torch loaded) fork instead of
    spawn."""
    drop = (
        [] if user is None else ["setpriv", f"--reuid={user}", f"--regid={user}", "--clear-groups"]
    )
    return [
        *drop,
        "prlimit",
        f"--as={limits.memory_mb * 2**20}",
        f"--nproc={limits.max_processes}",
        f"--fsize={limits.max_file_mb * 2**20}",
        "--core=0",
        "--",
    ]


def _kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


async def run_limited(
    argv: list[str], limits: CommandLimits, user: Optional[int] = None
) -> CommandResult:
    """Run ``argv`` in a new process group (as ``user`` when given); see the module docstring."""
    start = time.monotonic()
    proc = await asyncio.create_subprocess_exec(
        *_launcher(limits, user),
        *argv,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
        start_new_session=True,
    )
    assert proc.stdout is not None
    reading = asyncio.ensure_future(_drain(proc.stdout, limits.max_output_bytes))
    timed_out = False
    try:
        await asyncio.wait_for(asyncio.shield(proc.wait()), timeout=limits.timeout_s)
    except asyncio.TimeoutError:
        timed_out = True
        _kill_group(proc.pid)
    except BaseException:  # cancelled: nothing of the command may outlive its episode
        _kill_group(proc.pid)
        reading.cancel()
        raise
    try:
        kept, dropped = await asyncio.wait_for(reading, timeout=_KILL_GRACE_S)
    except asyncio.TimeoutError:  # something still holds the pipe open: end it
        _kill_group(proc.pid)
        kept, dropped = b"", 0
    code = await proc.wait()
    return CommandResult(
        exit_code=None if timed_out else code,
        output=kept.decode("utf-8", errors="replace"),
        timed_out=timed_out,
        truncated_bytes=dropped,
        duration_s=time.monotonic() - start,
    )


__all__ = [
    "SANDBOX_UID",
    "CommandLimits",
    "CommandResult",
    "bwrap_argv",
    "missing_bwrap",
    "run_limited",
]
