"""Fixtures for the environments catalogue: the envs' folder on sys.path, one tiny model per session."""

from __future__ import annotations

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
    import os
    import subprocess

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
