"""The ``serve-openenv`` app in-process (``create_openenv_app``) with a stub env: openenv's HTTP routes
and every frame of its WebSocket protocol (reset, step, state, close, and the error frames), the
session cap and a rollout that raises."""

from __future__ import annotations

from typing import Any, Optional

import pytest
from fastapi.testclient import TestClient

from atroposlib.interop.openenv.client_replies import CURRENT
from atroposlib.interop.openenv.serve_app import create_openenv_app


class QuizEnv:
    """Items are sums; a rollout asks the model (the client) once and scores its answer."""

    name = "quiz"

    def __init__(self, n_items: int = 100) -> None:
        self.items = [{"q": f"{i}+1=", "a": str(i + 1)} for i in range(n_items)]

    async def get_next_item(self) -> Optional[dict[str, str]]:
        return self.items.pop(0) if self.items else None

    async def collect_trajectories(self, item: dict[str, str]) -> tuple[Any, list[Any]]:
        channel = CURRENT.get()
        assert channel is not None
        reply = await channel.ask({"prompt": item["q"], "messages": None})
        if reply == "boom":
            raise RuntimeError("the rollout failed")
        if reply == "drop":
            return None, []
        return {"scores": [1.0 if reply == item["a"] else 0.0], "messages": None}, []


@pytest.fixture
def client() -> Any:
    with TestClient(create_openenv_app(QuizEnv(), max_sessions=1)) as c:
        yield c


def _error(frame: dict[str, Any]) -> tuple[str, str]:
    assert frame["type"] == "error", frame
    return frame["data"]["code"], frame["data"]["message"]


def test_http_routes_answer_as_openenv(client):
    assert client.get("/health").json() == {"status": "healthy"}
    meta = client.get("/metadata")
    assert meta.status_code == 200
    assert meta.json() == {
        "name": "quiz",
        "description": "Items are sums; a rollout asks the model (the client) once and scores its answer.",
        "version": None,
    }
    schema = client.get("/schema").json()
    assert schema["action"]["required"] == ["message"]
    assert set(schema["observation"]["properties"]) == {"prompt", "messages"}
    assert set(schema["state"]["properties"]) == {"episode_id", "step_count"}


def test_a_session_resets_steps_and_reads_its_state(client):
    with client.websocket_connect("/ws") as ws:
        ws.send_json({"type": "state"})
        assert ws.receive_json() == {"type": "state", "data": {"episode_id": None, "step_count": 0}}
        ws.send_json({"type": "reset", "data": {"seed": 5}})
        first = ws.receive_json()
        assert first["type"] == "observation"
        assert first["data"]["observation"]["prompt"] == "0+1="
        assert first["data"]["done"] is False and first["data"]["reward"] is None
        ws.send_json({"type": "step", "data": {"message": "1"}})
        last = ws.receive_json()["data"]
        assert last["done"] is True and last["reward"] == 1.0
        assert last["metadata"] == {"kept": True, "steps": 1, "score": 1.0}
        ws.send_json({"type": "state"})
        state = ws.receive_json()["data"]
        assert state["step_count"] == 1 and state["episode_id"] is not None
        ws.send_json({"type": "step", "data": {"message": "1"}})
        assert _error(ws.receive_json()) == (
            "EXECUTION_ERROR",
            "the episode is over; send reset to start another",
        )
        ws.send_json({"type": "reset", "data": {"seed": 5}})  # the same seed: the same item
        assert ws.receive_json()["data"]["observation"]["prompt"] == "0+1="
        ws.send_json({"type": "step", "data": {"message": "drop"}})
        dropped = ws.receive_json()["data"]
        assert dropped["done"] is True and dropped["reward"] is None
        assert dropped["metadata"] == {"kept": False, "steps": 1}
        ws.send_json({"type": "close"})


def test_bad_frames_get_openenv_error_frames_and_the_session_stays_open(client):
    with client.websocket_connect("/ws") as ws:
        ws.send_text("{not json")
        code, message = _error(ws.receive_json())
        assert code == "INVALID_JSON" and message.startswith("Invalid JSON: ")
        ws.send_json({"type": "dance"})
        assert _error(ws.receive_json()) == ("UNKNOWN_TYPE", "Unknown message type: dance")
        ws.send_json({"type": "step", "data": {"message": "1"}})
        assert _error(ws.receive_json()) == ("EXECUTION_ERROR", "send reset before step")
        ws.send_json({"type": "reset"})
        assert ws.receive_json()["type"] == "observation"
        ws.send_json({"type": "step", "data": {"text": "1"}})
        assert _error(ws.receive_json()) == (
            "VALIDATION_ERROR",
            "the action needs a string field 'message'",
        )
        ws.send_json({"type": "step", "data": {"message": "boom"}})
        code, message = _error(ws.receive_json())
        assert code == "EXECUTION_ERROR" and "the rollout failed" in message
        ws.send_json({"type": "step", "data": {"message": "1"}})  # the failed episode is gone
        assert _error(ws.receive_json()) == ("EXECUTION_ERROR", "send reset before step")
        ws.send_json({"type": "reset"})
        assert ws.receive_json()["data"]["observation"]["prompt"] == "1+1="


def test_a_session_over_max_sessions_is_refused_with_capacity_reached(client):
    with client.websocket_connect("/ws") as first:
        first.send_json({"type": "state"})
        first.receive_json()
        with client.websocket_connect("/ws") as second:
            frame = second.receive_json()
        assert frame["data"] == {
            "message": "Server at capacity (1/1 sessions)",
            "code": "CAPACITY_REACHED",
            "active_sessions": 1,
            "max_sessions": 1,
        }
    with client.websocket_connect("/ws") as again:  # the first one closed: room again
        again.send_json({"type": "state"})
        assert again.receive_json()["type"] == "state"


def test_an_env_out_of_items_says_so():
    with TestClient(create_openenv_app(QuizEnv(n_items=1))) as c, c.websocket_connect("/ws") as ws:
        ws.send_json({"type": "reset"})
        assert ws.receive_json()["type"] == "observation"
        ws.send_json({"type": "reset"})
        assert _error(ws.receive_json()) == ("EXECUTION_ERROR", "the env has no more items")
