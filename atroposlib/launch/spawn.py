"""Starting one component's process, the same way on every backend that starts processes (the local
backend, the Ray backend's actors): its output appended to its log after a ``=== start`` line, no
stdin, its own session (so a stop reaches every process it starts), and the package importable."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path
from typing import Optional


def package_root() -> str:
    """The folder holding ``atroposlib`` (and ``example_trainer``): children import the same code."""
    import atroposlib

    return str(Path(atroposlib.__file__).resolve().parent.parent)


def start_logged(
    argv: list[str], env: dict[str, str], log: Path, host: Optional[str] = None
) -> subprocess.Popen[bytes]:
    """Start ``argv`` with stdout and stderr appended to ``log`` (its folder made if missing), after
    a line ``=== start HH:MM:SS[ on HOST]: ARGV``; the child leads a process group of its own."""
    log.parent.mkdir(parents=True, exist_ok=True)
    where = f" on {host}" if host else ""
    with open(log, "ab") as fh:
        fh.write(f"\n=== start {time.strftime('%H:%M:%S')}{where}: {' '.join(argv)}\n".encode())
        fh.flush()
        return subprocess.Popen(
            argv,
            stdout=fh,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=env,
            start_new_session=True,  # its own process group: a stop reaches all it starts
        )


__all__ = ["package_root", "start_logged"]
