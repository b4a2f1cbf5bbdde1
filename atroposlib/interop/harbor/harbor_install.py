"""Where Harbor lives here: its Python 3.12 environment, its podman set-up, and why either is missing.

``scripts/setup_harbor.sh`` installs ``harbor`` (and ``podman-compose``) into
``~/.cache/atroposlib/harbor-<version>/`` (``ATROPOS_HARBOR_VENV`` to move it; ``ATROPOS_HARBOR_PYTHON``
names a user's own Python that has Harbor), and when podman works here it builds the local base image
the shipped tasks' Dockerfiles start from and writes ``podman/containers.conf`` there (``runc``, and the
ulimits this machine permits). Each part records why it could not be set up (``install-failed.txt``,
``podman/failed.txt``); ``missing_harbor``/``missing_podman`` return that one line.

``harbor_env`` is the process environment Harbor's commands run with: telemetry off, the checkout on
``PYTHONPATH`` (so Harbor imports our backend), the venv's ``bin`` on ``PATH`` (``podman-compose``),
``CONTAINERS_CONF`` when the set-up wrote one. Standard library only.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Optional

HARBOR_VERSION = "0.25.0"  # keep equal to VERSION in scripts/setup_harbor.sh
BASE_IMAGE = "docker.io/library/debian:bookworm-slim"
"""The image the shipped tasks start FROM; built here from Debian's packages (no registry)."""
OK_MARKER = ".atroposlib-harbor-ok"
PODMAN_OK = "ok"
REPO = Path(__file__).resolve().parents[3]


def harbor_venv() -> Path:
    env = os.environ.get("ATROPOS_HARBOR_VENV")
    if env:
        return Path(env).expanduser()
    return Path.home() / ".cache" / "atroposlib" / f"harbor-{HARBOR_VERSION}"


def harbor_python() -> Optional[str]:
    """The Python that has Harbor, or None."""
    own = os.environ.get("ATROPOS_HARBOR_PYTHON")
    if own:
        return own
    venv = harbor_venv()
    return str(venv / "bin" / "python") if (venv / OK_MARKER).is_file() else None


def _last_line(path: Path) -> str:
    lines = path.read_text(errors="replace").strip().splitlines()
    return lines[-1] if lines else "no reason recorded"


def missing_harbor() -> Optional[str]:
    """One line saying why Harbor cannot run here, or None."""
    if harbor_python() is not None:
        return None
    failed = harbor_venv() / "install-failed.txt"
    if failed.is_file():
        return f"Harbor could not be installed: {_last_line(failed)}"
    return (
        "Harbor is not installed: run scripts/setup_harbor.sh (it needs Python 3.12, e.g. from "
        "pyenv) or set ATROPOS_HARBOR_PYTHON to a Python that has harbor"
    )


def podman_dir() -> Path:
    return harbor_venv() / "podman"


def missing_podman() -> Optional[str]:
    """One line saying why Harbor's podman backend cannot run here, or None."""
    missing = missing_harbor()
    if missing:
        return missing
    if shutil.which("podman") is None:
        return "the podman sandbox needs podman: install the Debian package podman (apt-get install podman)"
    folder = podman_dir()
    if (folder / PODMAN_OK).is_file():
        return None
    if (folder / "failed.txt").is_file():
        return f"podman could not be set up for Harbor: {_last_line(folder / 'failed.txt')}"
    return "podman is not set up for Harbor (no local base image): run scripts/setup_harbor.sh"


def harbor_env(base: Optional[Mapping[str, str]] = None) -> dict[str, str]:
    """The environment for Harbor's processes (see the module docstring)."""
    env = dict(os.environ if base is None else base)
    python = harbor_python()
    if python:
        env["PATH"] = os.pathsep.join([str(Path(python).parent), env.get("PATH", "")])
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH", "")) if p)
    env["HARBOR_TELEMETRY"] = "0"
    conf = podman_dir() / "containers.conf"
    if conf.is_file():
        env.setdefault("CONTAINERS_CONF", str(conf))
    return env


__all__ = [
    "BASE_IMAGE",
    "HARBOR_VERSION",
    "harbor_env",
    "harbor_python",
    "harbor_venv",
    "missing_harbor",
    "missing_podman",
    "podman_dir",
]
