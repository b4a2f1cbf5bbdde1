"""A real managed-server proxy for tests: uvicorn on a free loopback port in a thread, in front of a
backend (the fake OpenAI server, our engine or a real vLLM), with a tap that keeps every chat answer
the proxy sent (what the client received: the JSON, or the server-sent events of a stream), and
what the conformance tests check against a session's nodes.

``delivered_replies(tap, session)`` reads the tap back as the replies the client was given: per
choice its ``content`` and ``tool_calls`` (a stream's pieces joined, as a client joins them), in the
order they were sent; ``trained_replies(nodes)`` reads a session's nodes back as the replies they
train; ``check_session`` asserts that the two are the same, that everything else is masked, and that
every node holds the backend's own token ids (``exactness_problem`` over the session's
``completions``).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Optional

import httpx
import uvicorn

from atroposlib.inference_clients.config import APIServerConfig
from atroposlib.inference_clients.proxy.app import create_app
from atroposlib.inference_clients.proxy.settings import ProxySettings
from atroposlib.inference_clients.server_manager import ServerManager
from atroposlib.inference_clients.tool_call_translator import parse_hermes_reply
from atroposlib.interop.agents.exactness import node_problem, session_turns
from atroposlib.type_definitions import MASK_IGNORE
from atroposlib.utils.net import free_port, wait_for_http


@dataclass
class Exchange:
    """One chat request the proxy answered: its path, body, status and the bytes it sent."""

    path: str
    body: dict[str, Any]
    status: int = 0
    sent: bytearray = field(default_factory=bytearray)


class Tap:
    """ASGI middleware keeping every ``/v1/chat/completions`` exchange (``exchanges``)."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.exchanges: list[Exchange] = []

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope.get("type") != "http" or not scope["path"].endswith("/v1/chat/completions"):
            await self.app(scope, receive, send)
            return
        chunks: list[bytes] = []

        async def taped_receive() -> Any:
            message = await receive()
            if message.get("type") == "http.request":
                chunks.append(message.get("body", b""))
            return message

        exchange = Exchange(scope["path"], {})
        self.exchanges.append(exchange)

        async def taped_send(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                exchange.status = message["status"]
                try:
                    exchange.body = json.loads(b"".join(chunks) or b"{}")
                except ValueError:
                    exchange.body = {}
            elif message["type"] == "http.response.body":
                exchange.sent += message.get("body", b"")
            await send(message)

        await self.app(scope, taped_receive, taped_send)


@dataclass
class RunningProxy:
    url: str
    tap: Tap
    app: Any
    manager: ServerManager

    def session(self, client: Optional[httpx.Client] = None, **body: Any) -> str:
        """A new session's uuid."""
        r = (client or httpx).post(f"{self.url}/sessions/create", json=body, timeout=30)
        assert r.status_code == 200, r.text
        return str(r.json()["uuid"])

    def session_url(self, session: str) -> str:
        return f"{self.url}/{session}/v1"

    def nodes(self, session: str, headers: Optional[dict[str, str]] = None) -> dict[str, Any]:
        r = httpx.get(f"{self.url}/{session}/nodes", headers=headers, timeout=30)
        assert r.status_code == 200, r.text
        return dict(r.json())

    @property
    def state(self) -> Any:
        return self.app.state.proxy


@contextmanager
def running_proxy(
    backend_url: str,
    tokenizer: Any,
    model_name: str = "policy",
    settings: Optional[ProxySettings] = None,
    max_model_len: Optional[int] = None,
    max_retries: int = 1,
) -> Iterator[RunningProxy]:
    """The proxy app over one backend, served on loopback until the block ends."""
    config = APIServerConfig(
        base_url=backend_url,
        model_name=model_name,
        server_type="vllm",
        max_retries=max_retries,
        timeout=300,
    )
    manager = ServerManager([config])
    app = create_app(manager, tokenizer, model_name, settings, max_model_len)
    tap = Tap(app)
    port = free_port()
    server = uvicorn.Server(
        uvicorn.Config(tap, host="127.0.0.1", port=port, log_level="warning", lifespan="off")
    )
    thread = threading.Thread(target=server.run, name=f"proxy-{port}", daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{port}"
    try:
        wait_for_http(url + "/health", timeout=30)
        yield RunningProxy(url, tap, app, manager)
    finally:
        server.should_exit = True
        thread.join(15)


def _stream_choices(sent: bytes) -> list[dict[str, Any]]:
    """A stream's choices as a client assembles them: content pieces joined, tool calls built from
    their deltas (``index``, ``id``, ``function.name``, ``function.arguments`` pieces)."""
    choices: dict[int, dict[str, Any]] = {}
    for line in sent.decode().split("\n"):  # at \n only, as the OpenAI SDK splits
        if not line.startswith("data: ") or line == "data: [DONE]":
            continue
        for choice in json.loads(line[len("data: ") :]).get("choices", []):
            got = choices.setdefault(choice["index"], {"content": None, "calls": {}})
            delta = choice.get("delta") or {}
            if delta.get("content") is not None:
                got["content"] = (got["content"] or "") + delta["content"]
            for call in delta.get("tool_calls") or []:
                slot = got["calls"].setdefault(call["index"], {"name": "", "arguments": ""})
                fn = call.get("function") or {}
                slot["name"] += fn.get("name") or ""
                slot["arguments"] += fn.get("arguments") or ""
    return [
        {"content": c["content"] or None, "tool_calls": [c["calls"][i] for i in sorted(c["calls"])]}
        for _, c in sorted(choices.items())
    ]


def delivered_replies(tap: Tap, session: str) -> list[dict[str, Any]]:
    """Every reply the client of ``session`` was sent (200 answers only), choice by choice:
    ``content`` (None when empty), ``tool_calls`` (name, arguments), and ``tools``: whether the
    request offered tools (its reply was then read for calls)."""
    out: list[dict[str, Any]] = []
    for ex in tap.exchanges:
        if ex.status != 200 or f"/{session}/" not in ex.path:
            continue
        if ex.body.get("stream"):
            choices = _stream_choices(bytes(ex.sent))
        else:
            answer = json.loads(bytes(ex.sent))
            choices = [
                {
                    "content": c["message"].get("content") or None,
                    "tool_calls": [
                        {"name": t["function"]["name"], "arguments": t["function"]["arguments"]}
                        for t in c["message"].get("tool_calls") or []
                    ],
                }
                for c in answer["choices"]
            ]
        out += [{**c, "tools": bool(ex.body.get("tools"))} for c in choices]
    return out


def trained_runs(node: dict[str, Any]) -> list[list[int]]:
    """The runs of trained (unmasked) token ids of ``node``, in order."""
    runs: list[list[int]] = []
    previous = MASK_IGNORE
    for mask in node["masked_tokens"]:
        if mask != MASK_IGNORE:
            if previous == MASK_IGNORE:
                runs.append([])
            runs[-1].append(mask)
        previous = mask
    return runs


def _as_reply(text: str, tools: bool) -> dict[str, Any]:
    if not tools:
        return {"content": text or None, "tool_calls": []}
    parsed = parse_hermes_reply(text)
    return {
        "content": parsed.content or None,
        "tool_calls": [
            {"name": c.function.name, "arguments": c.function.arguments} for c in parsed.calls
        ],
    }


def check_session(proxy: RunningProxy, session: str, tok: Any) -> dict[str, Any]:
    """Assert the nodes of ``session`` train exactly the replies its client received (each once,
    everything else masked, the backend's own ids); returns the nodes answer."""
    got = proxy.nodes(session)
    delivered = delivered_replies(proxy.tap, session)
    runs = [run for node in got["nodes"] for run in trained_runs(node)]
    assert len(runs) == len(delivered), (len(runs), delivered)
    unmatched = list(delivered)
    for run in runs:
        text = tok.decode(run, skip_special_tokens=True, clean_up_tokenization_spaces=False)
        for i, reply in enumerate(unmatched):
            want = {k: reply[k] for k in ("content", "tool_calls")}
            if _as_reply(text, reply["tools"]) == want:
                del unmatched[i]
                break
        else:
            raise AssertionError(f"a trained reply the client never received: {text!r}")
    for node in got["nodes"]:
        n = len(node["tokens"])
        assert len(node["masked_tokens"]) == len(node["logprobs"]) == n
        for token, mask, lp in zip(
            node["tokens"], node["masked_tokens"], node["logprobs"], strict=True
        ):
            assert mask in (MASK_IGNORE, token)
            assert (lp == 1.0) == (mask == MASK_IGNORE)  # masked positions carry the placeholder
    turns = session_turns(got["completions"])
    for node in got["nodes"]:
        problem = node_problem(node["tokens"], node["masked_tokens"], turns)
        assert problem is None, problem
    return got


__all__ = [
    "Exchange",
    "RunningProxy",
    "Tap",
    "check_session",
    "delivered_replies",
    "running_proxy",
    "trained_runs",
]
