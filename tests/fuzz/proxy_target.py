"""The managed-server proxy as a fuzzing target (``targets.TARGETS``' ``proxy`` entry):
``atropos-proxy`` (a subprocess, its key through ``ATROPOS_PROXY_API_KEY``) in front of the CPU engine
on the tiny model (the engine's own key through the proxy's ``ATROPOS_PROXY_BACKEND_API_KEY``), fuzzed
from its own ``/openapi.json``; afterwards it is healthy, logged no traceback, and a fresh session
still completes a chat and records it."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import httpx

from atroposlib.utils.net import free_port
from tests.live_servers import LiveServer, engine_server

PROXY_KEY = "fuzz-proxy-key"
ENGINE_KEY = "fuzz-engine-key"


class ProxyOverEngine(LiveServer):
    """The proxy's process, which stops the engine behind it with itself."""

    def __init__(self, engine: LiveServer, work: Path, model_dir: Path) -> None:
        port = free_port()
        argv = [sys.executable, "-m", "atroposlib.cli.proxy", "--base-url", engine.url + "/v1"]
        argv += ["--tokenizer", str(model_dir), "--port", str(port), "--max-n", "4"]
        argv += ["--max-sessions", "64", "--log-level", "warning"]
        env = {"ATROPOS_PROXY_API_KEY": PROXY_KEY, "ATROPOS_PROXY_BACKEND_API_KEY": ENGINE_KEY}
        super().__init__(argv, work / f"proxy-{port}.log", port, token=PROXY_KEY, env=env)
        self.engine = engine

    def stop(self) -> None:
        super().stop()
        self.engine.stop()


def start_proxy(work: Path, model_dir: Path) -> LiveServer:
    """The engine (n <= 4, a 64-token context: every answer in milliseconds), then the proxy."""
    engine = engine_server(
        model_dir, work, "--max-n", "4", "--max-model-len", "64", api_key=ENGINE_KEY
    )
    engine.start()
    try:
        return ProxyOverEngine(engine, work, model_dir).start()
    except BaseException:
        engine.stop()
        raise


def proxy_still_serves(server: LiveServer, before: Any) -> None:
    """Healthy, no traceback in its log, and a fresh session completes and records a chat."""
    assert httpx.get(server.url + "/health", timeout=30).status_code == 200
    assert "Traceback" not in server.log(), server.log()[-4000:]
    with httpx.Client(base_url=server.url, headers=server.headers, timeout=60) as h:
        session = h.post("/sessions/create", json={})
        assert session.status_code == 200, session.text
        sid = session.json()["uuid"]
        body = {"messages": [{"role": "user", "content": "1 + 1 ="}], "max_tokens": 4}
        r = h.post(f"/{sid}/v1/chat/completions", json=body)
        assert r.status_code == 200, r.text
        assert h.get(f"/{sid}/nodes").json()["nodes"]


__all__ = ["PROXY_KEY", "ProxyOverEngine", "proxy_still_serves", "start_proxy"]
