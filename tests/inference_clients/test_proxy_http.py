"""The proxy over real HTTP in front of the fake OpenAI server, driven by the ``openai`` client:
streams in OpenAI's chunk shapes (tool-call deltas, the usage chunk) that add up to the JSON answer,
``usage`` and ``logprobs`` on answers, a session's ``/v1/models``, the backend's 4xx kept as that 4xx
(its failures a 502), the key, the session cap and idle expiry with their counts, a turn limit, and
a client that leaves before its answer: nothing it did not receive is recorded. Every session's nodes
are checked against what its client was sent (``proxy_harness.check_session``). ``atropos-proxy``
itself starts, refuses a backend that does not answer in one line, and warns when exposed."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time

import httpx
import openai
import pytest
from transformers import AutoTokenizer

from atroposlib.cli.proxy import exposure_warning
from atroposlib.inference_clients.proxy.settings import ProxySettings
from atroposlib.inference_clients.proxy_client import create_proxy_session
from atroposlib.testing import FakeOpenAIServer, tiny_tokenizer_dir
from atroposlib.utils.net import free_port
from tests.inference_clients.proxy_harness import check_session, running_proxy

CALL = '<tool_call>{"name": "calculator", "arguments": {"expression": "6 * 7"}}</tool_call>'
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "calculator",
            "parameters": {"type": "object", "properties": {"expression": {"type": "string"}}},
        },
    }
]


def reply(prompt: str, body: dict) -> str:
    """Tool calls for 'calc', slow for 'slow', otherwise a fixed sentence per choice."""
    last_turn = prompt.rsplit("<|im_start|>", 2)[-2]
    if "slow" in last_turn:
        time.sleep(1.5)
    if "calc" in last_turn:
        return CALL
    return ["The answer is 42.", "It is 42 ✓"][body.get("choice_index", 0) % 2]


@pytest.fixture(scope="module")
def tok():
    return AutoTokenizer.from_pretrained(str(tiny_tokenizer_dir()))


@pytest.fixture(scope="module")
def fake(tok):
    with FakeOpenAIServer(tokenizer=tok, responder=reply, model="policy") as server:
        yield server


@pytest.fixture(scope="module")
def proxy(fake, tok):
    with running_proxy(fake.base_url, tok, settings=ProxySettings(max_n=4)) as running:
        yield running


def _client(proxy, session, key="x"):
    return openai.OpenAI(base_url=proxy.session_url(session), api_key=key, max_retries=0)


def test_a_stream_is_openais_chunks_and_adds_up_to_the_answer(proxy, tok):
    plain, streamed = proxy.session(), proxy.session()
    ask = {"model": "policy", "messages": [{"role": "user", "content": "use calc"}], "tools": TOOLS}
    answer = _client(proxy, plain).chat.completions.create(**ask, max_tokens=300)
    chunks = list(
        _client(proxy, streamed).chat.completions.create(
            **ask, max_tokens=300, stream=True, stream_options={"include_usage": True}
        )
    )
    assert chunks[0].choices[0].delta.role == "assistant"
    calls = [
        c.choices[0].delta.tool_calls for c in chunks if c.choices and c.choices[0].delta.tool_calls
    ]
    assert calls[0][0].function.name == "calculator" and calls[0][0].function.arguments == ""
    assert calls[0][0].id and calls[1][0].function.arguments == '{"expression": "6 * 7"}'
    finish = [c.choices[0].finish_reason for c in chunks if c.choices]
    assert finish[-1] == "tool_calls" and all(f is None for f in finish[:-1])
    assert chunks[-1].choices == [] and chunks[-1].usage == answer.usage
    assert answer.usage.prompt_tokens > 0 and answer.usage.completion_tokens > len(CALL) // 4
    assert answer.choices[0].message.tool_calls[0].function.arguments == '{"expression": "6 * 7"}'
    text = proxy.session()
    pieces = [
        c.choices[0].delta.content
        for c in _client(proxy, text).chat.completions.create(
            model="policy", messages=[{"role": "user", "content": "hi"}], stream=True, logprobs=True
        )
        if c.choices and c.choices[0].delta.content
    ]
    assert len(pieces) > 5 and "".join(pieces) == "The answer is 42."
    for session in (plain, streamed, text):
        check_session(proxy, session, tok)


def test_answers_carry_usage_logprobs_and_every_choice(proxy, fake, tok):
    session = proxy.session()
    client = _client(proxy, session)
    assert [m.id for m in client.models.list()] == ["policy"]
    out = client.chat.completions.create(
        model="policy",
        messages=[{"role": "user", "content": [{"type": "text", "text": "hi"}]}],
        n=2,
        logprobs=True,
        stop="never",
        seed=3,
        top_p=0.9,
        max_completion_tokens=64,
    )
    assert [c.message.content for c in out.choices] == ["The answer is 42.", "It is 42 ✓"]
    ids = proxy.nodes(session)["completions"][0]["token_ids"]
    assert out.usage.completion_tokens == sum(len(i) for i in ids)
    lps = out.choices[0].logprobs.content
    assert len(lps) == len(ids[0]) and all(lp.logprob <= 0 for lp in lps)
    sent = proxy.tap.exchanges[-1].body
    assert sent["stop"] == "never" and sent["max_completion_tokens"] == 64
    wanted = ("stop", "seed", "top_p", "max_tokens")
    backend = {k: v for k, v in fake.requests[-1].items() if k in wanted}
    assert backend == {"stop": ["never"], "seed": 3, "top_p": 0.9, "max_tokens": 64}
    check_session(proxy, session, tok)


def test_the_backends_refusal_keeps_its_4xx_and_its_failure_is_a_502(proxy, fake):
    session = proxy.session()
    client = _client(proxy, session)
    ask = {"model": "policy", "messages": [{"role": "user", "content": "hi"}]}
    fake.fail_next(1, 400)
    before = len(fake.requests)
    with pytest.raises(openai.BadRequestError) as refused:
        client.chat.completions.create(**ask)
    assert "the inference server refused: scripted failure 400" in refused.value.message
    assert len(fake.requests) == before + 1  # a 4xx is not retried
    fake.fail_next(1, 500)
    with pytest.raises(openai.InternalServerError) as failed:
        client.chat.completions.create(**ask)
    assert failed.value.status_code == 502
    assert proxy.nodes(session)["nodes"] == []
    assert proxy.state.counts["backend_errors"] >= 2


def test_a_turn_limit_refuses_the_next_completion(proxy, tok):
    session = proxy.session(max_turns=1)
    client = _client(proxy, session)
    ask = {"model": "policy", "messages": [{"role": "user", "content": "hi"}]}
    client.chat.completions.create(**ask)
    with pytest.raises(openai.BadRequestError, match="turn limit \\(1 chat completions\\)"):
        client.chat.completions.create(**ask)
    got = check_session(proxy, session, tok)
    assert got["turns"] == 1 and got["turn_limit_hit"] is True


def test_a_client_that_leaves_before_its_answer_is_not_trained(proxy):
    for stream in (False, True):
        session = proxy.session()
        body = {"messages": [{"role": "user", "content": "slow"}], "stream": stream}
        before = proxy.state.counts["undelivered"]
        with pytest.raises(httpx.ReadTimeout):
            httpx.post(f"{proxy.session_url(session)}/chat/completions", json=body, timeout=0.5)
        deadline = time.monotonic() + 10
        while proxy.state.counts["undelivered"] == before and time.monotonic() < deadline:
            time.sleep(0.1)
        got = proxy.nodes(session)
        assert got["nodes"] == [] and got["completions"] == []
        assert proxy.state.counts["undelivered"] == before + 1


def test_the_key_caps_and_idle_expiry(fake, tok):
    settings = ProxySettings(api_key="s3cret", max_sessions=3, session_idle_timeout=1.0)
    key = {"Authorization": "Bearer s3cret"}
    with running_proxy(fake.base_url, tok, settings=settings) as proxy:
        assert httpx.get(proxy.url + "/health").status_code == 200  # open without the key
        for path in ("/sessions", "/servers", "/v1/models"):
            denied = httpx.get(proxy.url + path)
            assert denied.status_code == 401 and denied.headers["www-authenticate"] == "Bearer"
            assert denied.json()["error"]["type"] == "authentication_error"
        # an env's proxy session client sends the key too (ATROPOS_PROXY_API_KEY, or given)
        assert asyncio.run(_proxy_session_turn(proxy.url)) == ("The answer is 42.", 1)
        with httpx.Client(headers=key) as http:
            first, _ = proxy.session(http), proxy.session(http)
            full = http.post(proxy.url + "/sessions/create", json={})
            assert full.status_code == 429 and "--max-sessions" in full.json()["error"]["message"]
        with pytest.raises(openai.AuthenticationError):
            _client(proxy, first, key="wrong").chat.completions.create(
                model="policy", messages=[{"role": "user", "content": "hi"}]
            )
        _client(proxy, first, key="s3cret").chat.completions.create(
            model="policy", messages=[{"role": "user", "content": "hi"}]
        )
        time.sleep(2.2)
        health = httpx.get(proxy.url + "/health").json()
        assert health["sessions"] == 0 and health["counts"]["sessions_expired"] == 3
        gone = httpx.get(f"{proxy.url}/{first}/nodes", headers=key)
        assert (
            gone.status_code == 404 and "closed after 1 s idle" in gone.json()["error"]["message"]
        )
        assert httpx.post(proxy.url + "/sessions/create", json={}, headers=key).status_code == 200


async def _proxy_session_turn(url: str) -> tuple[str, int]:
    session = await create_proxy_session(url, api_key="s3cret", model_name="policy")
    out = await session.chat_completion(messages=[{"role": "user", "content": "hi"}], max_tokens=50)
    return str(out.choices[0].message.content), len(session.get_state()["nodes"])


def test_atropos_proxy_serves_and_says_why_it_cannot(fake, tok):
    port = free_port()
    cmd = [sys.executable, "-m", "atroposlib.cli.proxy", "--base-url", fake.base_url]
    cmd += ["--port", str(port), "--tokenizer", str(tiny_tokenizer_dir()), "--log-level", "warning"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        line = proc.stdout.readline()  # type: ignore[union-attr]
        assert line.startswith(f"atropos-proxy: serving policy from {fake.base_url} on "), line
        health = httpx.get(f"http://127.0.0.1:{port}/health", timeout=10).json()
        assert health["model"] == "policy" and health["healthy_servers"] == 1
    finally:
        proc.terminate()
        proc.wait(20)
    down = subprocess.run(
        [sys.executable, "-m", "atroposlib.cli.proxy", "--base-url", "http://127.0.0.1:9/v1"]
        + ["--backend-wait", "0", "--port", "0"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert down.returncode == 2 and down.stderr.count("\n") == 1
    assert down.stderr.startswith(
        "atropos-proxy: error: the backend at http://127.0.0.1:9/v1 did not"
    )
    assert exposure_warning(ProxySettings(host="0.0.0.0")) is not None
    assert exposure_warning(ProxySettings(host="0.0.0.0", api_key="k")) is None
    assert exposure_warning(ProxySettings(host="127.0.0.1")) is None
    assert json.loads(json.dumps(ProxySettings().model_dump()))["max_sessions"] == 1024
