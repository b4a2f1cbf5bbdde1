"""Fixtures for the environments catalogue: the envs' folder on sys.path, one tiny model and one CPU
engine per session, and the package installed from its wheel (``installed_wheel``)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ENV_DIR = Path(__file__).resolve().parents[2] / "environments"
if str(ENV_DIR) not in sys.path:
    sys.path.insert(0, str(ENV_DIR))


@pytest.fixture(scope="session")
def env_dir() -> Path:
    return ENV_DIR


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny Llama + ChatML tokenizer saved as a standard HF folder (built locally, < 5 s)."""
    from atroposlib.inference.tiny_model import build_tiny_model

    return Path(build_tiny_model(tmp_path_factory.mktemp("tiny-model") / "model", seed=0))


@pytest.fixture(scope="session")
def tiny_tokenizer(tiny_model_dir: Path):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(tiny_model_dir))


@pytest.fixture(scope="session")
def cpu_engine(tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory):
    """The real CPU inference engine serving the tiny model as ``tiny`` (subprocess, loopback port)."""
    from atroposlib.utils.net import free_port, wait_for_http

    port = free_port()
    log = open(tmp_path_factory.mktemp("engine") / "engine.log", "wb")
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "atroposlib.cli.serve_model",
            "--model",
            str(tiny_model_dir),
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--torch-threads",
            "1",
            "--served-model-name",
            "tiny",  # an unknown model name is a 404, as in vLLM: requests must say "tiny"
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
    )
    try:
        wait_for_http(f"http://127.0.0.1:{port}/health", timeout=120, proc=proc)
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        proc.terminate()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
        log.close()


REPO = ENV_DIR.parent


class WheelInstall:
    """atroposlib as a user gets it from ``pip install``: the wheel built from this checkout,
    installed (no deps, not editable) into a folder of its own. ``run`` starts a copied env file on
    it with ``python -S`` and ``PYTHONPATH`` = that folder + the test venv's site-packages (the
    dependencies), so neither the checkout's editable install nor ``environments/`` is importable."""

    def __init__(self, site: Path) -> None:
        import sysconfig

        self.site = site
        deps = dict.fromkeys([sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]])
        self.pythonpath = os.pathsep.join([str(site), *deps])

    def env(self) -> dict[str, str]:
        return {**os.environ, "PYTHONPATH": self.pythonpath}

    def copy_env_file(self, name: str, folder: Path) -> Path:
        """``environments/<name>`` copied alone into ``folder`` (outside the repo)."""
        folder.mkdir(parents=True, exist_ok=True)
        return Path(shutil.copy(ENV_DIR / name, folder / name))

    def command(self, script: Path, *args: str) -> list[str]:
        return [sys.executable, "-S", str(script), *args]


@pytest.fixture(scope="session")
def installed_wheel(tmp_path_factory: pytest.TempPathFactory) -> WheelInstall:
    root = tmp_path_factory.mktemp("wheel")
    src = root / "src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy(REPO / name, src / name)
    for package in ("atroposlib", "example_trainer", "demo"):
        shutil.copytree(REPO / package, src / package, ignore=shutil.ignore_patterns("__pycache__"))
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q"]
    built = subprocess.run(
        [*pip, "wheel", "--no-deps", "--no-build-isolation", "-w", str(root / "dist"), str(src)],
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert built.returncode == 0, built.stderr[-3000:]
    (wheel,) = (root / "dist").glob("atroposlib-*.whl")
    site = root / "site"
    installed = subprocess.run(
        [*pip, "install", "--no-deps", "--target", str(site), str(wheel)],
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert installed.returncode == 0, installed.stderr[-3000:]
    wheel_install = WheelInstall(site)
    probe = (
        "import importlib.util as u, atroposlib; print(atroposlib.__file__); "
        "print(u.find_spec('gsm8k_server'), u.find_spec('tests'))"
    )
    seen = subprocess.run(
        [sys.executable, "-S", "-c", probe],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=root,
        env=wheel_install.env(),
    )
    where, others = seen.stdout.splitlines()
    assert where.startswith(str(site)) and others == "None None", seen.stdout + seen.stderr
    return wheel_install
