"""Fixtures of the Harbor tests: the shipped tasks, trial folders a sandbox's own uid can enter, task
copies made for one test, and the tiers' skips (bubblewrap; Harbor in its Python 3.12 environment;
podman set up for Harbor), each with the reason ``scripts/setup_harbor.sh`` recorded."""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from atroposlib.interop.harbor.bwrap import missing_bwrap
from atroposlib.interop.harbor.harbor_install import harbor_python, missing_harbor, missing_podman
from atroposlib.interop.harbor.host_sandbox import make_trial_dir

REPO = Path(__file__).resolve().parents[3]
TASKS = REPO / "environments" / "harbor_tasks"


@pytest.fixture(scope="session")
def bwrap() -> None:
    """Skip where the host sandbox cannot run (no bubblewrap)."""
    missing = missing_bwrap()
    if missing:
        pytest.skip(missing)


@pytest.fixture(scope="session")
def harbor() -> str:
    """The Python that has Harbor (skip with the set-up's reason where there is none)."""
    missing = missing_harbor()
    if missing:
        pytest.skip(missing)
    python = harbor_python()
    assert python is not None
    return python


@pytest.fixture(scope="session")
def podman(harbor: str) -> str:
    """Harbor's Python, where podman is also set up for it (its local base image built)."""
    missing = missing_podman()
    if missing:
        pytest.skip(missing)
    return harbor


@pytest.fixture
def trials() -> Iterator[Path]:
    """A folder for trial folders that a trial's own uid may enter (pytest's tmp_path may not)."""
    folder = make_trial_dir(prefix="harbor-tests-")
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture
def task_copy(tmp_path: Path) -> Callable[..., Path]:
    """``task_copy(name, **files)``: a copy of the shipped task ``name`` (``train/count-00``) with
    some files replaced (``{"tests/test.sh": "..."}``), for one test."""

    def make(name: str, files: dict[str, str] | None = None) -> Path:
        folder = tmp_path / Path(name).name
        shutil.copytree(TASKS / name, folder)
        for relative, text in (files or {}).items():
            (folder / relative).parent.mkdir(parents=True, exist_ok=True)
            (folder / relative).write_text(text)
        return folder

    return make
