"""What the proxy refuses, and how it reads what it accepts, without a backend: every field it cannot
honour is a 400 (404 for a model it does not serve) naming the field in OpenAI's error body, never
dropped; message contents as text parts, ``developer`` and ``content: null`` as the chat template
reads them; a stream's pieces add up to the reply; the nodes a request recorded are taken back; the
session store's cap and idle expiry; the key; the OpenAPI schema declares the statuses each route
really answers (the traffic over HTTP is ``test_proxy_http.py``)."""

from __future__ import annotations

import json
import time
from types import SimpleNamespace

import pytest
from fastapi.testclient import TestClient
from transformers import AutoTokenizer

from atroposlib.inference_clients.config import APIServerConfig
from atroposlib.inference_clients.proxy.app import create_app
from atroposlib.inference_clients.proxy.auth import key_matches
from atroposlib.inference_clients.proxy.protocol import ChatMessage
from atroposlib.inference_clients.proxy.recording import Recording
from atroposlib.inference_clients.proxy.request_translation import template_messages
from atroposlib.inference_clients.proxy.sessions import SessionState, SessionStore
from atroposlib.inference_clients.proxy.settings import ProxySettings
from atroposlib.inference_clients.proxy.streaming import content_pieces
from atroposlib.inference_clients.server_manager import ServerManager
from atroposlib.inference_clients.tool_call_translator import ToolCallTranslator
from atroposlib.testing import tiny_tokenizer_dir

USER = [{"role": "user", "content": "hi"}]


@pytest.fixture(scope="module")
def tok():
    return AutoTokenizer.from_pretrained(str(tiny_tokenizer_dir()))


def _app(tok, **settings):
    config = APIServerConfig(
        base_url="http://127.0.0.1:9/v1",
        model_name="policy",
        server_type="vllm",
        health_check=False,
    )
    return create_app(ServerManager([config]), tok, "policy", ProxySettings(**settings))


@pytest.fixture(scope="module")
def client(tok):
    with TestClient(_app(tok, max_n=4)) as c:
        yield c


@pytest.fixture(scope="module")
def session(client) -> str:
    return str(client.post("/sessions/create", json={}).json()["uuid"])


REFUSED = [
    ({"foo": 1}, 400, "foo", "not a field the proxy serves"),
    ({"response_format": {"type": "json_object"}}, 400, "response_format", "constrained decoding"),
    ({"top_logprobs": 2, "logprobs": True}, 400, "top_logprobs", "sampled tokens' logprobs only"),
    ({"store": True}, 400, "store", "keeps no completions"),
    ({"stream_options": {"include_usage": True}}, 400, "stream_options", "only with stream"),
    ({"model": "gpt-4o"}, 404, "model", "The model `gpt-4o` does not exist. Served: `policy`"),
    ({"n": 5}, 400, "n", "n: at most 4 (the proxy's --max-n), got 5"),
    ({"messages": []}, 400, "messages", "must not be empty"),
    ({"messages": [{"role": "function", "content": "x"}]}, 400, "messages[0].role", "one of"),
    (
        {"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {}}]}]},
        400,
        "messages[0].content[0]",
        "only text parts are served (got type 'image_url')",
    ),
    (
        {"messages": [{"role": "user", "content": "x", "audio": {"id": "a"}}]},
        400,
        "messages[0].audio",
        "not rendered by the chat template",
    ),
    ({"seed": 2**63}, 400, "seed", "less than or equal to"),
    ({"max_tokens": 0}, 400, "max_tokens", "greater than or equal to 1"),
    ({"stop": ["ok", ""]}, 400, "stop", "stop strings must be non-empty"),
    (
        {"stream_options": {"include_usage": True, "x": 1}, "stream": True},
        400,
        "stream_options.x",
        "",
    ),
    (
        {"tools": [{"type": "function", "function": "calc"}]},
        400,
        "tools",
        "tools[0] is not a function",
    ),
    ({"tool_choice": "maybe"}, 400, "tool_choice", "one of none, auto, required"),
    ({"tool_choice": {"type": "function", "function": "f"}}, 400, "tool_choice", "one of"),
    (
        {"messages": [{"role": "assistant", "tool_calls": [{"function": "f"}]}]},
        400,
        "messages[0].tool_calls[0]",
        "expected",
    ),
]


@pytest.mark.parametrize("extra, status, param, words", REFUSED)
def test_what_the_proxy_cannot_honour_is_refused_by_name(
    client, session, extra, status, param, words
):
    r = client.post(f"/{session}/v1/chat/completions", json={"messages": USER, **extra})
    assert r.status_code == status, r.text
    error = r.json()["error"]
    assert error["param"] == param and words in error["message"] and error["code"] == status


def test_numbers_and_text_no_backend_can_take_are_400s(client, session):
    nan = '{"messages": [{"role": "user", "content": "hi"}], "temperature": NaN}'
    r = client.post(
        f"/{session}/v1/chat/completions", content=nan, headers={"content-type": "application/json"}
    )
    assert r.status_code == 400 and r.json()["error"]["param"] == "temperature"
    lone = json.dumps({"messages": [{"role": "user", "content": "a\ud800b"}]})
    r = client.post(
        f"/{session}/v1/chat/completions",
        content=lone,
        headers={"content-type": "application/json"},
    )
    assert r.status_code == 400
    assert r.json()["error"]["message"].startswith("messages[0].content: a lone surrogate")
    bad_json = client.post(
        f"/{session}/v1/chat/completions", content="{", headers={"content-type": "application/json"}
    )
    assert (
        bad_json.status_code == 400 and bad_json.json()["error"]["type"] == "invalid_request_error"
    )


def test_an_unknown_session_is_a_404_in_openai_shape(client):
    for method, path in (("POST", "/nope/v1/chat/completions"), ("GET", "/nope/v1/models")):
        r = client.request(method, path, json={"messages": USER})
        assert r.status_code == 404
        assert r.json()["error"] == {
            "message": "Session nope not found",
            "type": "not_found_error",
            "param": None,
            "code": 404,
        }


def test_refusals_are_counted_by_field(tok):
    with TestClient(_app(tok)) as c:
        sid = c.post("/sessions/create", json={}).json()["uuid"]
        for _ in range(2):
            c.post(f"/{sid}/v1/chat/completions", json={"messages": USER, "foo": 1})
        c.post(f"/{sid}/v1/chat/completions", json={"messages": USER, "seed": -(2**63)})
        assert c.get("/health").json()["counts"]["refused"] == {"foo": 2, "seed": 1}


def test_messages_as_the_chat_template_reads_them(tok):
    translator = ToolCallTranslator(tok, "hermes")
    messages = [
        ChatMessage(role="developer", content="be brief"),
        ChatMessage(
            role="user", content=[{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]
        ),
        ChatMessage(role="assistant", content=None),
        ChatMessage(
            role="assistant",
            content=None,
            tool_calls=[
                {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
            ],
        ),
        ChatMessage(role="tool", content=[{"type": "text", "text": "4"}], tool_call_id="c1"),
    ]
    out = template_messages(messages, translator)
    assert out[0] == {"role": "system", "content": "be brief"}
    assert out[1] == {"role": "user", "content": "a\nb"}  # text parts joined as vLLM joins them
    assert out[2] == {"role": "assistant", "content": ""}
    assert out[3] == {
        "role": "assistant",
        "content": '<tool_call>{"name": "f", "arguments": {}}</tool_call>',
    }
    assert out[4] == {"role": "tool", "content": "4", "tool_call_id": "c1"}


@pytest.mark.parametrize("text", ["The answer is 42.", "héllo wörld ✓ 日本", "a\u2028b", ""])
def test_stream_pieces_add_up_to_the_reply(tok, text):
    ids = list(tok.encode(text, add_special_tokens=False)) + [tok.eos_token_id]
    pieces = content_pieces(tok, ids, text or None)
    assert "".join(p for p, _, _ in pieces) == text
    assert all(piece for piece, _, _ in pieces)
    if text:
        assert len(pieces) > 1 and pieces[0][1] == 0
        spans = [(a, b) for _, a, b in pieces]
        assert all(b1 == a2 for (_, b1), (a2, _) in zip(spans, spans[1:], strict=False))
    # a reply whose content is shorter than its text (the part before a tool call)
    cut = content_pieces(tok, ids, text[:3] or None)
    assert "".join(p for p, _, _ in cut) == text[:3]


def _node(tokens):
    return SimpleNamespace(tokens=list(tokens))


def test_a_request_takes_back_only_its_own_nodes():
    parent, other = _node([1, 2]), _node([7])
    managed = SimpleNamespace(current_nodes=[parent, other], track_tree=False)
    rec = Recording.start(managed)
    child = _node([1, 2, 3, 4])  # what the managed server does: the extension replaces its parent
    managed.current_nodes.remove(parent)
    managed.current_nodes.append(child)
    concurrent = _node([9])  # another request of the session, at the same time
    managed.current_nodes.append(concurrent)
    assert rec.added() == [child, concurrent]
    later = Recording.start(managed)
    assert later.added() == []
    Recording(managed, [parent, other, concurrent]).undo()  # the first request's view
    assert managed.current_nodes == [other, concurrent, parent]
    tree = SimpleNamespace(sequences={"a": parent}, track_tree=True)
    rec = Recording.start(tree)
    tree.sequences["ab"] = child
    assert rec.undo() == 1 and tree.sequences == {"a": parent}


def _session(uuid: str, last: float) -> SessionState:
    s = SessionState(uuid, None, None, "policy")  # type: ignore[arg-type]
    s.last_accessed = last
    return s


def test_the_session_store_expires_idle_sessions_and_counts_them():
    now = time.time()
    store = SessionStore(max_sessions=2, idle_timeout=10.0)
    store.add(_session("old", now - 11.0))
    store.add(_session("new", now - 5.0))
    assert store.expire_idle(now=now, force=True) == 1
    assert store.expired == 1 and len(store) == 1
    assert store.expired_recently("old") and not store.expired_recently("new")
    store.add(_session("third", now - 20.0))
    assert store.expire_idle(now=now + 0.5) == 0  # at most one sweep a second
    assert not store.full  # it sweeps first: "third" was idle
    store.add(_session("fourth", now))
    assert store.full and store.expired == 2


def test_the_key_is_a_bearer_token_compared_whole():
    assert key_matches("Bearer s3cret", "s3cret") and key_matches("bearer  s3cret ", "s3cret")
    for header in ("", "Bearer", "Bearer s3cre", "Basic s3cret", "s3cret", "Bearer s3cret2"):
        assert not key_matches(header, "s3cret")


def test_the_schema_declares_the_statuses_the_proxy_answers(tok):
    open_schema = _app(tok).openapi()
    keyed_schema = _app(tok, api_key="k").openapi()
    for schema, keyed in ((open_schema, False), (keyed_schema, True)):
        for path, operations in schema["paths"].items():
            for op in operations.values():
                codes = set(op["responses"])
                assert "422" not in codes
                assert ("401" in codes) == (keyed and path != "/health"), (path, codes)
                assert ("security" in op) == (keyed and path != "/health")
    chat = keyed_schema["paths"]["/{session_uuid}/v1/chat/completions"]["post"]
    assert set(chat["responses"]) == {"200", "400", "401", "404", "409", "502"}
    assert set(chat["responses"]["200"]["content"]) == {"application/json", "text/event-stream"}
    assert keyed_schema["components"]["securitySchemes"]["bearer"]["scheme"] == "bearer"
    create = open_schema["paths"]["/sessions/create"]["post"]
    assert set(create["responses"]) == {"200", "400", "404", "429"}
    assert "HTTPValidationError" not in open_schema["components"]["schemas"]
