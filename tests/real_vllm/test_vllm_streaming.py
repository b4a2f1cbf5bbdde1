"""Streams of our engine have the chunk structure of a real vLLM server's, request for request.

Both serve the same tiny model; each request runs to a fixed length (``ignore_eos``), so both
send one chunk per token. Compared per chunk, in each choice's own sequence: the keys of the envelope, of
the choice and of its ``delta``, which fields are null, and the usage chunk; not the values (the two
detokenize differently), nor how the choices of one stream interleave (that depends on vLLM's timing).
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from atroposlib.utils.net import free_port, wait_for_http
from tests.sse import sse_lines

NULLABLE = ("logprobs", "finish_reason", "stop_reason", "token_ids", "prompt_token_ids")


def _events(url: str, path: str, body: dict[str, Any]) -> list[Any]:
    out: list[Any] = []
    with httpx.stream("POST", url + path, json=body, timeout=300) as r:
        assert r.status_code == 200, r.read()
        for line in sse_lines(r):
            if line:
                data = line.removeprefix("data: ")
                out.append(data if data == "[DONE]" else json.loads(data))
    return out


def _shape(ev: Any) -> Any:
    if ev == "[DONE]":
        return ev
    top = {k: ev[k] is None for k in ev if k not in ("system_fingerprint", "choices", "usage")}
    choices = [
        (
            sorted(ch),
            sorted(ch.get("delta", {})),
            {k: ch[k] is None for k in NULLABLE if k in ch},
        )
        for ch in ev["choices"]
    ]
    return top, choices, sorted(ev["usage"]) if "usage" in ev else None


@pytest.fixture(scope="module")
def both(dev_vllm, tiny_model_dir, vllm_logs) -> Iterator[tuple[str, str]]:
    vllm = dev_vllm["plain"]
    port = free_port()
    log = open(vllm_logs / "engine.log", "wb")
    engine = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "atroposlib.cli.serve_model",
            "--model",
            str(tiny_model_dir),
            "--port",
            str(port),
            "--host",
            "127.0.0.1",
            "--torch-threads",
            "1",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_for_http(url + "/health", timeout=120, proc=engine)
        yield vllm.url, url
    finally:
        engine.terminate()
        engine.wait(30)
        log.close()


REQUESTS = [
    (
        "/v1/chat/completions",
        {
            "messages": [{"role": "user", "content": "hi"}],
            "n": 2,
            "temperature": 1.0,
            "seed": 1,
            "return_token_ids": True,
            "stream_options": {"include_usage": True},
        },
    ),
    (
        "/v1/chat/completions",
        {"messages": [{"role": "user", "content": "hi"}], "logprobs": True, "top_logprobs": 2},
    ),
    (
        "/v1/completions",
        {
            "prompt": ["hello", "abc"],
            "n": 2,
            "temperature": 1.0,
            "seed": 1,
            "logprobs": 1,
            "return_token_ids": True,
            "stream_options": {"include_usage": True, "continuous_usage_stats": True},
        },
    ),
    ("/v1/completions", {"prompt": "hello"}),
]


@pytest.mark.parametrize("path,body", REQUESTS, ids=["chat-n2-ids", "chat-lp", "cmpl-ids", "cmpl"])
def test_stream_chunks_have_vllms_structure(
    both, path: str, body: dict[str, Any], tiny_model_dir: Path
):
    vllm_url, ours_url = both
    common = {"max_tokens": 4, "temperature": 0.0, "ignore_eos": True, "stream": True, **body}
    theirs = _events(vllm_url, path, {"model": str(tiny_model_dir), **common})
    ours = _events(ours_url, path, common)
    assert _per_choice(ours) == _per_choice(theirs)


def _per_choice(events: list[Any]) -> tuple[dict[int, list[Any]], list[Any]]:
    """Each choice's own chunk sequence, and the chunks that carry no choice (usage, [DONE]) in order.
    How the choices of one stream interleave depends on timing (vLLM's scheduler), so it is not compared;
    every chunk here carries a single choice, as both servers send them."""
    chunks: dict[int, list[Any]] = {}
    rest: list[Any] = []
    for ev in events:
        if ev == "[DONE]" or not ev["choices"]:
            rest.append(_shape(ev))
            continue
        assert len(ev["choices"]) == 1, ev
        chunks.setdefault(ev["choices"][0]["index"], []).append(_shape(ev))
    return chunks, rest
