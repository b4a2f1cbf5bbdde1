"""Process groups on this machine (the launcher's components, the trainer's restart-mode server): each
runs in its own session, so stopping it reaches every process it started (torchrun's ranks, a server's
workers). Zombies count as gone."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path


def _state(pid: int) -> str:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return ""
    return stat.rsplit(")", 1)[-1].split()[0]


def pid_alive(pid: int) -> bool:
    """``pid`` exists and is not a zombie."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return _state(pid) not in ("Z", "X")


def group_members(pgid: int) -> list[int]:
    """Live (non-zombie) processes of process group ``pgid``."""
    proc = Path("/proc")
    if not proc.is_dir():  # not Linux: ask the kernel about the group as a whole
        try:
            os.killpg(pgid, 0)
        except (ProcessLookupError, PermissionError):
            return []
        return [pgid]
    out = []
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[-1].split()
        except OSError:
            continue
        if len(fields) > 2 and int(fields[2]) == pgid and fields[0] not in ("Z", "X"):
            out.append(int(entry.name))
    return out


def group_stopped(pgid: int) -> bool:
    """Some process of group ``pgid`` is stopped (SIGSTOP, a debugger), so the group makes no
    progress."""
    return any(_state(pid) in ("T", "t") for pid in group_members(pgid))


def signal_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def stop_groups(pgids: list[int], timeout: float) -> None:
    """SIGTERM every group, wait up to ``timeout`` s for all to end, then SIGKILL what is left."""
    live = [g for g in pgids if group_members(g)]
    for g in live:
        signal_group(g, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while live and time.monotonic() < deadline:
        time.sleep(0.1)
        live = [g for g in live if group_members(g)]
    for g in live:
        signal_group(g, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while live and time.monotonic() < deadline:
        time.sleep(0.05)
        live = [g for g in live if group_members(g)]


__all__ = ["group_members", "group_stopped", "pid_alive", "signal_group", "stop_groups"]
