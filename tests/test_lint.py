"""Lint as part of the suite: the tree is ruff-formatted and passes ruff's lint rules.

Both run only where ruff is installed (the `dev` extra, which the README's set-up installs).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _ruff() -> list[str]:
    exe = Path(sys.executable).with_name("ruff")
    if exe.exists():
        return [str(exe)]
    found = shutil.which("ruff")
    if found is None:
        pytest.skip("ruff is not installed (pip install -e '.[dev]')")
    return [found]


@pytest.mark.parametrize(
    "args", [["format", "--check", "."], ["check", "."]], ids=["format", "lint"]
)
def test_ruff(args: list[str]) -> None:
    proc = subprocess.run(_ruff() + args, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, (
        f"ruff {' '.join(args)} failed:\n{proc.stdout[-3000:]}{proc.stderr[-2000:]}"
    )
