"""The run directory's state file (``DIR/launch-state.json``), written by the launcher and read by
``atropos-launch status`` and ``stop``: the run's state and, per component, where it runs, its state,
restarts, URL, log path and process id."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Optional

from atroposlib.errors import ConfigError

STATE_FILE = "launch-state.json"


def state_path(run_dir: Path) -> Path:
    return run_dir / STATE_FILE


def write_state(run_dir: Path, state: dict[str, Any]) -> None:
    """Replace the state file atomically (a reader never sees half a file)."""
    path = state_path(run_dir)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(state, indent=1) + "\n")
    os.replace(tmp, path)


def read_state(run_dir: Path) -> dict[str, Any]:
    """The state file of ``run_dir``; ``ConfigError`` when there is none or it is unreadable."""
    path = state_path(run_dir)
    if not path.is_file():
        raise ConfigError(
            f"{run_dir}: no launch state here (not a run directory of atropos-launch)"
        )
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as e:
        raise ConfigError(f"{path}: unreadable state file ({e})") from None
    if not isinstance(data, dict) or "components" not in data:
        raise ConfigError(f"{path}: not a launch state file")
    return data


def launcher_alive(state: dict[str, Any]) -> Optional[int]:
    """The launcher's pid when it is still running, else None."""
    from atroposlib.utils.procs import pid_alive

    pid = state.get("launcher_pid")
    return pid if isinstance(pid, int) and pid_alive(pid) else None


__all__ = ["STATE_FILE", "launcher_alive", "read_state", "state_path", "write_state"]
