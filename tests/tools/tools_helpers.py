"""Helpers shared by the tools tests (kept out of conftest so test modules can import them)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path


def write_jsonl(path: Path, records: list[dict]) -> Path:
    with path.open("w", encoding="utf-8") as fh:
        for r in records:
            fh.write(json.dumps(r) + "\n")
    return path


def run_cli(module: str, *args: str, timeout: float = 120, env_extra: dict | None = None):
    """Run ``python -m module args`` and return the CompletedProcess (text)."""
    env = dict(os.environ)
    env.update(env_extra or {})
    return subprocess.run(
        [sys.executable, "-m", module, *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
    )
