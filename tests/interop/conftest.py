"""Fixtures of the interop tests: the real ``openenv`` package in its own environment, an OpenEnv server
written with openenv's own server code, our CPU engine on a tiny model, and a hostile WebSocket server.

openenv lives in its own environment (its dependencies conflict with the project's extras), made once by
``scripts/setup_openenv.sh`` (called here when it is missing) and reused; ``ATROPOS_OPENENV_PYTHON``
points at a user's own. Where there is none, the tests that need it skip with the set-up's reason.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

import pytest

from atroposlib.utils.net import free_port, wait_for_http

OPENENV_VERSION = "0.10.0"  # keep equal to VERSION in scripts/setup_openenv.sh
REPO = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent


def openenv_venv() -> Path:
    env = os.environ.get("ATROPOS_OPENENV_VENV")
    if env:
        return Path(env).expanduser()
    return Path.home() / ".cache" / "atroposlib" / f"openenv-{OPENENV_VERSION}"


def find_openenv_python() -> Optional[str]:
    env = os.environ.get("ATROPOS_OPENENV_PYTHON")
    if env:
        return env
    venv = openenv_venv()
    return str(venv / "bin" / "python") if (venv / ".atroposlib-openenv-ok").exists() else None


@pytest.fixture(scope="session")
def openenv_python() -> str:
    """The Python that has openenv; set up once (cached under ~/.cache/atroposlib) or skip."""
    py = find_openenv_python()
    failed = openenv_venv() / "install-failed.txt"
    if py is None and os.environ.get("ATROPOS_SKIP_OPENENV") != "1" and not failed.is_file():
        subprocess.run(
            ["bash", str(REPO / "scripts" / "setup_openenv.sh")],
            timeout=1200,
            check=False,
            stdout=subprocess.DEVNULL,
        )
        py = find_openenv_python()
    if py is None:
        if failed.is_file():
            pytest.skip("openenv could not be installed: " + failed.read_text().strip())
        pytest.skip("no openenv: run scripts/setup_openenv.sh or set ATROPOS_OPENENV_PYTHON")
    return py


class Proc:
    """A server subprocess on a free loopback port, logging to a file (``wait`` for it to answer)."""

    def __init__(self, argv: list[str], port: int, health: str, log: Path) -> None:
        self.port = port
        self.url = f"http://127.0.0.1:{port}"
        self.health = health
        self.log_path = log
        self._log = open(log, "ab")
        self.proc = subprocess.Popen(argv, stdout=self._log, stderr=subprocess.STDOUT)

    def wait(self) -> Proc:
        try:
            wait_for_http(self.url + self.health, timeout=180, proc=self.proc)
        except Exception as exc:
            self.stop()
            raise RuntimeError(
                "server did not start:\n" + self.log_path.read_text(errors="replace")
            ) from exc
        return self

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
def tiny_model_dir(tmp_path_factory) -> Path:
    from atroposlib.inference.tiny_model import build_tiny_model

    return build_tiny_model(tmp_path_factory.mktemp("interop-tiny") / "model", seed=0)


@dataclass
class RealStack:
    """A real OpenEnv server and our engine (the session's one ``tiny_engine``)."""

    count_server: Proc  # openenv_count_server.py, one session at a time (openenv's default)
    engine: Proc  # our CPU engine serving the tiny model as ``tiny``


@pytest.fixture(scope="session")
def real_stack(openenv_python, tiny_engine, tmp_path_factory) -> Iterator[RealStack]:
    port = free_port()
    count = Proc(
        [openenv_python, str(HERE / "openenv_count_server.py"), str(port), "1"],
        port,
        "/health",
        tmp_path_factory.mktemp("interop-logs") / "count.log",
    )
    try:
        yield RealStack(count.wait(), tiny_engine)
    finally:
        count.stop()


class HostileServer:
    """A WebSocket server of ours that speaks OpenEnv's frames until ``mode`` says to misbehave.

    Modes: ``good`` (a 2-step episode, reward 1 per step), ``silent`` (never answers),
    ``close_mid`` (answers reset, closes at the first step), ``refuse`` (CAPACITY_REACHED on
    connect, then closes), ``not_json`` / ``binary`` / ``no_observation`` / ``bad_reward`` (a
    malformed answer to reset), ``step_error`` (an EXECUTION_ERROR frame for the step),
    ``tool_silent`` (offers one MCP tool, ``lookup``, and never answers its calls).
    ``probe_ok=True`` serves the first connection (the env's start-up probe) as ``good``.
    """

    def __init__(self, mode: str, probe_ok: bool = True) -> None:
        self.mode, self.probe_ok = mode, probe_ok
        self.connections = 0
        self.port = free_port()
        self.url = f"ws://127.0.0.1:{self.port}"
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._stop: Optional[asyncio.Future[None]] = None
        self._thread = threading.Thread(target=self._run, daemon=True)

    async def _handler(self, ws: Any) -> None:
        self.connections += 1
        mode = "good" if self.probe_ok and self.connections == 1 else self.mode
        if mode == "refuse":
            err = {"message": "Server at capacity (1/1 sessions)", "code": "CAPACITY_REACHED"}
            await ws.send(json.dumps({"type": "error", "data": err}))
            await ws.close()
            return
        steps = 0
        async for raw in ws:
            msg = json.loads(raw)
            kind = msg.get("type")
            if kind == "close":
                await ws.close()
                return
            if mode == "silent":
                continue
            if kind == "mcp" and mode == "tool_silent":
                if msg["data"].get("method") == "tools/list":
                    tool = {"name": "lookup", "description": "d", "inputSchema": {}}
                    rpc = {"jsonrpc": "2.0", "id": msg["data"].get("id")}
                    rpc["result"] = {"tools": [tool]}
                    await ws.send(json.dumps({"type": "mcp", "data": rpc}))
                continue  # tools/call: never answered
            if kind == "reset":
                bad = {
                    "not_json": "{not json",
                    "binary": b"\x00\x01",
                    "no_observation": json.dumps({"type": "observation", "data": {"done": False}}),
                    "bad_reward": json.dumps(
                        {
                            "type": "observation",
                            "data": {
                                "observation": {"prompt": "x"},
                                "reward": "lots",
                                "done": False,
                            },
                        }
                    ),
                }.get(mode)
                if bad is not None:
                    await ws.send(bad)
                    continue
                obs = {"prompt": f"seed {msg['data'].get('seed')}: say hi"}
                await ws.send(json.dumps({"type": "observation", "data": {"observation": obs}}))
            elif kind == "step":
                if mode == "close_mid":
                    await ws.close()
                    return
                if mode == "step_error":
                    err = {"message": "action has no field 'message'", "code": "EXECUTION_ERROR"}
                    await ws.send(json.dumps({"type": "error", "data": err}))
                    continue
                steps += 1
                data = {
                    "observation": {"prompt": f"step {steps} ok"},
                    "reward": 1.0,
                    "done": steps >= 2,
                }
                await ws.send(json.dumps({"type": "observation", "data": data}))
            else:  # as openenv's servers answer a frame type they do not know (e.g. "mcp")
                err = {"message": f"Unknown message type: {kind}", "code": "UNKNOWN_TYPE"}
                await ws.send(json.dumps({"type": "error", "data": err}))

    def _run(self) -> None:
        from websockets.asyncio.server import serve

        async def main() -> None:
            self._stop = self._loop.create_future()
            async with serve(self._handler, "127.0.0.1", self.port):
                self._ready.set()
                await self._stop

        self._loop.run_until_complete(main())

    def __enter__(self) -> HostileServer:
        self._thread.start()
        assert self._ready.wait(10)
        return self

    def __exit__(self, *exc: Any) -> None:
        def finish() -> None:
            if self._stop is not None and not self._stop.done():
                self._stop.set_result(None)

        self._loop.call_soon_threadsafe(finish)
        self._thread.join(10)


@pytest.fixture(scope="session")
def tiny_engine(tiny_model_dir, tmp_path_factory) -> Iterator[Proc]:
    """Our CPU engine serving the tiny model as ``tiny``: the policy of every interop test, started once
    for the session."""
    port = free_port()
    argv = [
        sys.executable,
        "-m",
        "atroposlib.cli.serve_model",
        "--model",
        str(tiny_model_dir),
        "--served-model-name",
        "tiny",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--torch-threads",
        "1",
        "--log-level",
        "warning",
    ]
    engine = Proc(argv, port, "/health", tmp_path_factory.mktemp("engine-logs") / "engine.log")
    try:
        yield engine.wait()
    finally:
        engine.stop()
