"""Where the official BFCL checker lives: the Python that has ``bfcl_eval`` (its own cached environment,
made by ``scripts/setup_bfcl.sh``; a user's own through ``ATROPOS_BFCL_PYTHON``; or this interpreter where
``bfcl_eval`` is importable here), and the one line that says what to install when there is none."""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path
from typing import Optional

BFCL_EVAL_VERSION = "2026.3.23"  # keep equal to VERSION in scripts/setup_bfcl.sh
WORKER = Path(__file__).with_name("worker.py")
INSTALL_HINT = (
    "run scripts/setup_bfcl.sh (a light install of bfcl-eval into its own environment) or set "
    "ATROPOS_BFCL_PYTHON to a Python that has bfcl-eval"
)


def default_bfcl_venv() -> Path:
    """Where ``scripts/setup_bfcl.sh`` puts bfcl-eval's environment (``ATROPOS_BFCL_VENV`` overrides)."""
    env = os.environ.get("ATROPOS_BFCL_VENV")
    if env:
        return Path(env).expanduser()
    return Path.home() / ".cache" / "atroposlib" / f"bfcl-eval-{BFCL_EVAL_VERSION}"


def find_bfcl_python() -> Optional[str]:
    """The Python to run the BFCL worker with: ``ATROPOS_BFCL_PYTHON``, else the set-up's environment
    (once its install was verified), else this interpreter when it imports ``bfcl_eval``, else None."""
    env = os.environ.get("ATROPOS_BFCL_PYTHON")
    if env:
        return env
    venv = default_bfcl_venv()
    if (venv / ".atroposlib-bfcl-ok").exists():
        return str(venv / "bin" / "python")
    if importlib.util.find_spec("bfcl_eval") is not None:
        return sys.executable
    return None


def bfcl_missing() -> Optional[str]:
    """Why the BFCL checker cannot run here (one line naming what to install), or None."""
    if find_bfcl_python() is not None:
        return None
    failed = default_bfcl_venv() / "install-failed.txt"
    if failed.is_file():
        lines = failed.read_text().strip().splitlines() or ["(no reason recorded)"]
        return f"the BFCL checker could not be installed ({lines[-1]}); {INSTALL_HINT}"
    return f"no BFCL checker (bfcl-eval): {INSTALL_HINT}"


__all__ = [
    "BFCL_EVAL_VERSION",
    "INSTALL_HINT",
    "WORKER",
    "bfcl_missing",
    "default_bfcl_venv",
    "find_bfcl_python",
]
