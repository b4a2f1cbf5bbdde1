"""What every console script promises for a user mistake, checked on a real subprocess: the exit code
and exactly one line on stderr, without a traceback."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Optional

REPO_ROOT = Path(__file__).resolve().parent.parent


def run_module(
    module: str, *args: str, cwd: Optional[Path] = None, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    """``python -m module args`` with this checkout first on the path."""
    env = dict(os.environ, PYTHONPATH=str(REPO_ROOT))
    return subprocess.run(
        [sys.executable, "-m", module, *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
        cwd=str(cwd) if cwd else None,
    )


def one_line_error(proc: subprocess.CompletedProcess[str], code: int, *needles: str) -> str:
    """Assert exit ``code`` and a single stderr line containing each of ``needles``; return it."""
    shown = f"exit {proc.returncode}\nstdout: {proc.stdout[-2000:]}\nstderr: {proc.stderr[-2000:]}"
    assert proc.returncode == code, shown
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in proc.stderr, shown
    for needle in needles:
        assert needle in lines[0], shown
    return lines[0]
