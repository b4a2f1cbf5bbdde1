"""The managed-server proxy's app shape (``atroposlib.inference_clients.proxy``): its old module
paths re-export it, it serves its nine routes, a session's server is picked by url or load, the
session store, and the OpenAI error body for refusals that need no backend (the proxy's traffic
over real HTTP is in ``test_atropos_server_compat.py``)."""

from __future__ import annotations

import time
from types import SimpleNamespace

import pytest
from fastapi import HTTPException
from fastapi.testclient import TestClient

import atroposlib.envs.server_handling.managed_server_proxy as atropos_path
import atroposlib.inference_clients.managed_server_proxy as old_path
from atroposlib.inference_clients.config import APIServerConfig
from atroposlib.inference_clients.proxy import app, http, protocol, sessions
from atroposlib.inference_clients.proxy.servers import least_busy, server_at
from atroposlib.inference_clients.proxy.state import ProxyState
from atroposlib.inference_clients.server_manager import ServerManager

URL = "http://127.0.0.1:9/v1"


def _manager() -> ServerManager:
    config = APIServerConfig(
        base_url=URL, model_name="tiny", server_type="vllm", health_check=False
    )
    return ServerManager([config])


def test_old_module_paths_reexport_the_proxy_package():
    assert old_path.create_app is atropos_path.create_app is app.create_app
    assert old_path.openai_error is http.openai_error
    assert old_path.ChatCompletionProxyRequest is protocol.ChatCompletionProxyRequest
    assert old_path.SessionCreateRequest is protocol.SessionCreateRequest
    assert old_path.SessionState is sessions.SessionState


def test_the_proxy_serves_its_routes():
    paths = app.create_app(_manager(), tokenizer=None, model_name="tiny").openapi()["paths"]
    served = {(method.upper(), path) for path, ops in paths.items() for method in ops}
    assert served == {
        ("GET", "/health"),
        ("GET", "/v1/models"),
        ("GET", "/servers"),
        ("POST", "/sessions/create"),
        ("GET", "/sessions"),
        ("POST", "/{session_uuid}/v1/chat/completions"),
        ("POST", "/{session_uuid}/v1/chat/completions/render"),
        ("GET", "/{session_uuid}/v1/models"),
        ("GET", "/{session_uuid}/nodes"),
        ("DELETE", "/{session_uuid}"),
    }


def _server(url: str, free: int, healthy: bool = True) -> SimpleNamespace:
    sem = SimpleNamespace(available=lambda: free)
    return SimpleNamespace(config=SimpleNamespace(base_url=url), sem=sem, server_healthy=healthy)


def test_a_session_runs_on_the_server_at_its_url_else_the_least_busy_healthy_one():
    a, b, c = (
        _server("http://a/v1", 1),
        _server("http://b/v1/", 3),
        _server("http://c/v1", 9, False),
    )
    assert server_at([a, b, c], "http://b/v1") is b
    assert server_at([a, b, c], "http://a/v1/") is a
    assert server_at([a, b, c], "http://d/v1") is None
    assert least_busy([a, b, c]) is b
    assert least_busy([_server("x", 1, False), c]) is c  # none healthy: the freest of all


def test_the_session_store_touches_and_forgets_sessions():
    proxy = ProxyState(_manager(), tokenizer=None, model_name="tiny")
    session = sessions.SessionState("s1", managed_server=None, translator=None, model_name="tiny")  # type: ignore[arg-type]
    session.last_accessed = before = time.time() - 5.0
    proxy.sessions.add(session)
    assert len(proxy.sessions) == 1 and proxy.session("s1") is session
    assert session.last_accessed > before
    proxy.sessions.remove("s1")
    with pytest.raises(HTTPException) as missing:
        proxy.session("s1")
    assert missing.value.status_code == 404 and missing.value.detail == "Session s1 not found"


def test_refusals_answer_in_the_openai_error_body():
    with TestClient(app.create_app(_manager(), tokenizer=None, model_name="tiny")) as client:
        servers = client.get("/servers").json()["servers"]
        assert [(s["base_url"], s["server_type"], s["healthy"]) for s in servers] == [
            (URL, "vllm", True)
        ]
        bad = client.post("/sessions/create", json={"track_tree": "maybe"})
        assert bad.status_code == 400
        assert bad.json()["error"]["message"].startswith("track_tree: ")
        assert bad.json()["error"]["param"] == "track_tree"
        unknown = client.post("/sessions/create", json={"base_url": "http://nope/v1"})
        assert unknown.status_code == 404
        assert unknown.json() == {
            "error": {
                "message": f"No server with base_url 'http://nope/v1'. Available: ['{URL}']",
                "type": "not_found_error",
                "param": None,
                "code": 404,
            }
        }
        gone = client.delete("/nope")
        assert (
            gone.status_code == 404 and gone.json()["error"]["message"] == "Session nope not found"
        )
        health = client.get("/health").json()
        assert health == {
            "status": "ok",
            "model": "tiny",
            "sessions": 0,
            "servers": 1,
            "healthy_servers": 1,
            "counts": {
                "sessions_expired": 0,
                "refused": {"track_tree": 1},
                "undelivered": 0,
                "tool_choice_unmet": 0,
                "backend_errors": 0,
                "token_drifts": 0,
                "history_edits": 0,
            },
        }
