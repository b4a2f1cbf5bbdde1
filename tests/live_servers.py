"""Real server processes that a test module (or the fuzzing tier) shares: ``run-api`` and the CPU
inference engine, each a subprocess on a free loopback port logging to a file, started once and
stopped at teardown. (The per-test ``run_api`` / ``serve_model`` fixtures start one per test.)"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Optional

from atroposlib.utils.net import free_port, wait_for_http


class LiveServer:
    """One server subprocess: ``url``, ``token`` (its bearer token, if any), ``log()``, ``stop()``."""

    def __init__(
        self,
        argv: list[str],
        log_path: Path,
        port: int,
        token: Optional[str] = None,
        env: Optional[dict[str, str]] = None,
    ) -> None:
        self.argv = argv
        self.log_path = log_path
        self.port = port
        self.url = f"http://127.0.0.1:{port}"
        self.token = token
        self.env = env
        self.proc: Optional[subprocess.Popen] = None

    @property
    def headers(self) -> dict[str, str]:
        """The ``Authorization`` header this server wants (empty without a token)."""
        return {"Authorization": f"Bearer {self.token}"} if self.token else {}

    def start(self, timeout: float = 120.0) -> LiveServer:
        return self.launch().wait_ready(timeout)

    def launch(self) -> LiveServer:
        """Start the process without waiting for it (``wait_ready`` does)."""
        full_env = dict(os.environ, **(self.env or {}))
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(
                self.argv, stdout=log, stderr=subprocess.STDOUT, env=full_env
            )
        return self

    def wait_ready(self, timeout: float = 120.0) -> LiveServer:
        """Wait until ``/health`` answers (the process dying first is an error with its log)."""
        assert self.proc is not None, "launch() first"
        try:
            wait_for_http(self.url + "/health", timeout=timeout, proc=self.proc)
        except Exception as exc:
            self.stop()
            raise RuntimeError(f"{self.argv[2]} did not start:\n{self.log()[-3000:]}") from exc
        return self

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)

    def restart(self) -> LiveServer:
        """Stop it and start the same command again (same port, same data directory)."""
        self.stop()
        return self.start()

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""


def start_all(*servers: LiveServer) -> list[LiveServer]:
    """Launch every server, then wait for each: their start-ups overlap."""
    for server in servers:
        server.launch()
    try:
        return [server.wait_ready() for server in servers]
    except BaseException:
        for server in servers:
            server.stop()
        raise


def run_api_server(
    data_dir: Path, *args: str, token: Optional[str] = None, log_dir: Optional[Path] = None
) -> LiveServer:
    """A ``run-api`` on ``data_dir`` (not started yet); ``token`` goes in by its environment
    variable, as the docs advise (a flag shows in ``ps``)."""
    port = free_port()
    data_dir.mkdir(parents=True, exist_ok=True)
    argv = [
        sys.executable,
        "-m",
        "atroposlib.cli.run_api",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--data-dir",
        str(data_dir),
        "--progress-interval",
        "0",
        *args,
    ]
    env = {"ATROPOS_API_TOKEN": token} if token else {}
    log = (log_dir or data_dir.parent) / f"run-api-{port}.log"
    return LiveServer(argv, log, port, token=token, env=env)


def engine_server(
    model_dir: Path, log_dir: Path, *args: str, api_key: Optional[str] = None
) -> LiveServer:
    """``atropos-serve-model`` on ``model_dir`` with one torch thread (not started yet); ``api_key``
    goes in by ``ATROPOS_ENGINE_API_KEY``."""
    port = free_port()
    argv = [
        sys.executable,
        "-m",
        "atroposlib.cli.serve_model",
        "--model",
        str(model_dir),
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--torch-threads",
        "1",
        "--log-level",
        "warning",
        "--activity-interval",
        "0",
        *args,
    ]
    env = {"ATROPOS_ENGINE_API_KEY": api_key} if api_key else {}
    return LiveServer(argv, log_dir / f"engine-{port}.log", port, token=api_key, env=env)


__all__ = ["LiveServer", "engine_server", "run_api_server", "start_all"]
