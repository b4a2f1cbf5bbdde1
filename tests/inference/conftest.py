"""Fixtures for the inference tests: a tiny model built once per session and real server subprocesses."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from atroposlib.utils.net import free_port, wait_for_http


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory) -> Path:
    import torch

    torch.set_num_threads(1)
    from atroposlib.inference.tiny_model import build_tiny_model

    return build_tiny_model(tmp_path_factory.mktemp("tiny") / "model", seed=0)


@pytest.fixture(scope="session")
def tiny_model_dir_v2(tmp_path_factory) -> Path:
    """Same tokenizer and shape as ``tiny_model_dir`` but different weights (another seed)."""
    from atroposlib.inference.tiny_model import build_tiny_model

    return build_tiny_model(tmp_path_factory.mktemp("tiny2") / "model", seed=1)


class ServerProcess:
    """An `atropos-serve-model` subprocess on a free loopback port."""

    def __init__(self, model_dir: Path, extra: list[str], log_path: Path) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = log_path
        cmd = [
            sys.executable,
            "-m",
            "atroposlib.cli.serve_model",
            "--model",
            str(model_dir),
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--torch-threads",
            "1",
            "--log-level",
            "warning",
            *extra,
        ]
        self._log = open(log_path, "ab")
        self.proc = subprocess.Popen(cmd, stdout=self._log, stderr=subprocess.STDOUT)
        try:
            wait_for_http(self.url + "/health", timeout=120, proc=self.proc)
        except Exception as exc:
            self.stop()
            raise RuntimeError(
                "server did not start:\n" + log_path.read_text(errors="replace")
            ) from exc

    def client(self):
        from openai import OpenAI

        return OpenAI(base_url=self.url + "/v1", api_key="unused", max_retries=0, timeout=120)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self._log.close()


@pytest.fixture(scope="session")
def serve_model(tmp_path_factory) -> Iterator[Callable[..., ServerProcess]]:
    """Factory: ``serve_model(model_dir, "--max-queue", "2")`` starts a server, stopped at session end."""
    started: list[ServerProcess] = []
    logs = tmp_path_factory.mktemp("serve-logs")

    def start(model_dir: Path, *extra: str) -> ServerProcess:
        srv = ServerProcess(model_dir, list(extra), logs / f"server-{len(started)}.log")
        started.append(srv)
        return srv

    yield start
    for s in started:
        s.stop()


@pytest.fixture(scope="session")
def server(serve_model, tiny_model_dir) -> ServerProcess:
    """A shared server on the tiny model, served as ``tiny`` (tests must leave its base weights as they
    found them)."""
    return serve_model(tiny_model_dir, "--served-model-name", "tiny")
