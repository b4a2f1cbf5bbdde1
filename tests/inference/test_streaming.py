"""``stream: true`` on the real engine server: the official ``openai`` client and raw SSE lines.

What streams must add up to what the same request answers without streaming (text, token ids,
logprobs, finish reasons), in vLLM's chunk shapes; n>1 choices interleave; a client that leaves
mid-stream has its rows taken out of the batch and the server keeps serving.
"""

from __future__ import annotations

import json
import time
from collections import defaultdict
from typing import Any

import httpx

from tests.sse import sse_lines

CHAT = [{"role": "user", "content": "What is 2 + 3?"}]


def _events(url: str, path: str, body: dict[str, Any]) -> list[Any]:
    """The raw SSE stream: each ``data:`` payload parsed (``[DONE]`` kept as the string)."""
    out: list[Any] = []
    with httpx.stream("POST", url + path, json=body, timeout=120) as r:
        assert r.status_code == 200, r.read()
        assert r.headers["content-type"].startswith("text/event-stream")
        for line in sse_lines(r):
            if not line:
                continue
            assert line.startswith("data: "), line
            data = line[len("data: ") :]
            out.append(data if data == "[DONE]" else json.loads(data))
    return out


def test_openai_client_chat_stream_matches_non_streaming(server):
    client = server.client()
    kw: dict[str, Any] = dict(
        model="tiny", messages=CHAT, n=2, max_tokens=12, temperature=1.0, seed=11
    )
    plain = client.chat.completions.create(**kw)
    chunks = list(
        client.chat.completions.create(**kw, stream=True, stream_options={"include_usage": True})
    )
    text: dict[int, str] = defaultdict(str)
    finish: dict[int, str] = {}
    roles: dict[int, str] = {}
    for c in chunks[:-1]:
        assert c.object == "chat.completion.chunk" and len(c.choices) == 1
        ch = c.choices[0]
        assert ch.index not in finish, "nothing may follow a choice's finish_reason"
        if ch.delta.role:
            roles[ch.index] = ch.delta.role
            assert ch.index not in text, "the role comes first"
        text[ch.index] += ch.delta.content or ""
        if ch.finish_reason:
            finish[ch.index] = ch.finish_reason
    assert roles == {0: "assistant", 1: "assistant"}
    for ch in plain.choices:
        assert text[ch.index] == ch.message.content
        assert finish[ch.index] == ch.finish_reason
    assert chunks[-1].choices == [] and chunks[-1].usage is not None
    u = chunks[-1].usage
    assert (u.prompt_tokens, u.completion_tokens, u.total_tokens) == (
        plain.usage.prompt_tokens,
        plain.usage.completion_tokens,
        plain.usage.total_tokens,
    )
    assert len({c.id for c in chunks}) == 1


def test_completion_stream_two_prompts_n2_token_ids_and_logprobs(server):
    body = {
        "model": "tiny",
        "prompt": ["Hello there", "What is 1 + 2?"],
        "n": 2,
        "max_tokens": 9,
        "temperature": 1.0,
        "seed": 4,
        "logprobs": 2,
        "return_token_ids": True,
        "ignore_eos": True,
    }
    plain = httpx.post(server.url + "/v1/completions", json=body, timeout=120).json()
    events = _events(server.url, "/v1/completions", {**body, "stream": True})
    assert events[-1] == "[DONE]"
    got: dict[int, dict[str, Any]] = defaultdict(
        lambda: {"text": "", "ids": [], "lps": [], "tops": [], "offsets": [], "prompt": None}
    )
    for ev in events[:-1]:
        assert ev["object"] == "text_completion" and len(ev["choices"]) == 1
        ch = ev["choices"][0]
        assert set(ch) == {
            "index",
            "text",
            "logprobs",
            "finish_reason",
            "stop_reason",
            "prompt_token_ids",
            "token_ids",
        }
        g = got[ch["index"]]
        assert "finish" not in g
        if ch["prompt_token_ids"] is not None:
            assert g["prompt"] is None and not g["ids"], "prompt ids on the first chunk only"
            g["prompt"] = ch["prompt_token_ids"]
        g["text"] += ch["text"]
        g["ids"] += ch["token_ids"]
        g["lps"] += ch["logprobs"]["token_logprobs"]
        g["tops"] += ch["logprobs"]["top_logprobs"]
        g["offsets"] += ch["logprobs"]["text_offset"]
        if ch["finish_reason"] is not None:
            g["finish"] = ch["finish_reason"]
    assert sorted(got) == [0, 1, 2, 3]
    for ch in plain["choices"]:
        g = got[ch["index"]]
        assert g["text"] == ch["text"]
        assert g["ids"] == ch["token_ids"] and g["prompt"] == ch["prompt_token_ids"]
        assert g["lps"] == ch["logprobs"]["token_logprobs"]
        assert g["tops"] == ch["logprobs"]["top_logprobs"]
        assert g["offsets"] == ch["logprobs"]["text_offset"]
        assert g["finish"] == ch["finish_reason"] == "length"


def test_chat_stream_raw_shapes_token_ids_usage_and_stop_string(server):
    body = {
        "model": "tiny",
        "messages": CHAT,
        "max_tokens": 40,
        "temperature": 0.0,
        "return_token_ids": True,
        "logprobs": True,
        "top_logprobs": 1,
    }
    free = httpx.post(server.url + "/v1/chat/completions", json=body, timeout=120).json()
    full = free["choices"][0]["message"]["content"]
    assert len(full) > 6
    stop = full[3:6]  # a stop string the greedy answer runs into
    body["stop"] = [stop]
    plain = httpx.post(server.url + "/v1/chat/completions", json=body, timeout=120).json()
    pc = plain["choices"][0]
    assert pc["finish_reason"] == "stop" and pc["stop_reason"] == stop
    opts = {"include_usage": True, "continuous_usage_stats": True}
    events = _events(
        server.url, "/v1/chat/completions", {**body, "stream": True, "stream_options": opts}
    )
    first, *pieces, usage, done = events
    assert done == "[DONE]"
    assert first["choices"] == [
        {
            "index": 0,
            "delta": {"role": "assistant", "content": ""},
            "logprobs": None,
            "finish_reason": None,
        }
    ]
    assert first["prompt_token_ids"] == plain["prompt_token_ids"]
    text, ids, lps = "", [], []
    for ev in pieces:
        (ch,) = ev["choices"]
        assert set(ch["delta"]) == {"content"}
        text += ch["delta"]["content"]
        ids += ch["token_ids"]
        lps += ch["logprobs"]["content"]
        assert ev["usage"]["completion_tokens"] == len(ids)
    last = pieces[-1]["choices"][0]
    assert last["finish_reason"] == "stop" and last["stop_reason"] == stop
    assert all(ev["choices"][0]["finish_reason"] is None for ev in pieces[:-1])
    assert text == pc["message"]["content"] and stop not in text
    assert ids == pc["token_ids"] and lps == pc["logprobs"]["content"]
    assert usage["choices"] == [] and usage["usage"] == {
        "prompt_tokens": plain["usage"]["prompt_tokens"],
        "total_tokens": plain["usage"]["total_tokens"],
        "completion_tokens": plain["usage"]["completion_tokens"],
    }


def test_n_choices_stream_interleaved_by_index(server):
    body = {
        "model": "tiny",
        "prompt": "Hello there",
        "n": 3,
        "max_tokens": 10,
        "temperature": 1.0,
        "ignore_eos": True,
        "stream": True,
    }
    order = [ev["choices"][0]["index"] for ev in _events(server.url, "/v1/completions", body)[:-1]]
    assert sorted(set(order)) == [0, 1, 2] and len(order) == 30
    # one decode step gives every row a token: the choices take turns, not one after another
    assert order[:6] == [0, 1, 2, 0, 1, 2]


def _metric(url: str, name: str) -> float:
    for line in httpx.get(url + "/metrics").text.splitlines():
        if line.startswith(name + " ") or line.startswith(name + "_total "):
            return float(line.split()[-1])
    return 0.0


def test_client_leaving_mid_stream_aborts_its_rows_and_server_keeps_serving(server):
    before = _metric(server.url, "atropos_inference_aborted_rows")
    body = {
        "model": "tiny",
        "prompt": "Hello there",
        "n": 2,
        "max_tokens": 400,
        "temperature": 1.0,
        "ignore_eos": True,
        "stream": True,
    }
    with httpx.stream("POST", server.url + "/v1/completions", json=body, timeout=60) as r:
        lines = sse_lines(r)
        got = [next(lines) for _ in range(6)]
    assert any(x.startswith("data: {") for x in got)
    deadline = time.monotonic() + 30
    while _metric(server.url, "atropos_inference_aborted_rows") < before + 2:
        assert time.monotonic() < deadline, "the rows of the closed stream kept generating"
        time.sleep(0.1)
    again = server.client().completions.create(
        model="tiny", prompt="x", max_tokens=3, temperature=0.0, stream=True
    )
    assert sum(1 for _ in again) >= 1
    assert httpx.get(server.url + "/health").json()["status"] == "ok"
