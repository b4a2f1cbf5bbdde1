"""How long an inference request may take: a timeout that follows the tokens asked for, and a server
that never answers anything (a real socket that accepts and stays silent) taken as unreachable after
``unavailable_wait``, while a slow server that answers its health probes is waited for."""

from __future__ import annotations

import asyncio
import socket
import time

import pytest

from atroposlib.errors import InferenceUnavailable
from atroposlib.inference_clients.backend import ServerDown, ServerSlow
from atroposlib.inference_clients.backends.vllm import VLLMServer
from atroposlib.inference_clients.config import APIServerConfig
from atroposlib.inference_clients.server_manager import ServerManager
from atroposlib.testing import FakeOpenAIServer, SilentServer

PROMPT = [{"role": "user", "content": "What is 3+4?"}]


def _cfg(url: str, **kw) -> APIServerConfig:
    return APIServerConfig(base_url=url, server_type="vllm", model_name="tiny", api_key="x", **kw)


def test_the_request_timeout_follows_max_tokens_up_to_the_cap():
    server = VLLMServer(_cfg("http://127.0.0.1:1/v1", timeout_base=30, min_tokens_per_second=4))
    assert server.request_timeout({"max_tokens": 100}) == 30 + 25
    assert server.request_timeout({"max_completion_tokens": 400}) == 30 + 100
    assert server.request_timeout({"max_tokens": 1_000_000}) == 1200  # --openai.timeout caps it
    assert server.request_timeout({}) == 1200  # nothing to scale by: the cap alone


def test_an_attempt_past_its_timeout_fails_and_a_longer_budget_waits(tok_dir):
    def slow(prompt_text: str, body: dict) -> str:
        time.sleep(1.5)
        return "seven"

    async def go(fake: FakeOpenAIServer):
        cfg = _cfg(fake.base_url, timeout_base=0.5, min_tokens_per_second=10, max_retries=1)
        server = VLLMServer(cfg)
        try:
            with pytest.raises(ServerDown, match="no answer within 1s") as info:
                await server.chat_completion(messages=PROMPT, max_tokens=5)  # 0.5 + 0.5 s
            # alive (its /health answers) but slow: the words name the settings behind the limit
            assert "answers its health probe" in str(info.value)
            assert isinstance(info.value, ServerSlow)  # typed: a caller tells slow from gone
            assert "--openai.min_tokens_per_second 10 " in str(info.value)
            assert "--openai.timeout_base 0.5 s" in str(info.value)
            out = await server.chat_completion(messages=PROMPT, max_tokens=20)  # 0.5 + 2 s
            return out.choices[0].message.content
        finally:
            await server.close()

    with FakeOpenAIServer(tokenizer=tok_dir, responder=slow) as fake:
        assert asyncio.run(go(fake)) == "seven"


def test_a_server_that_never_answers_is_unreachable_after_the_wait():
    async def go(url: str) -> tuple[str, float]:
        sm = ServerManager([_cfg(url)], unavailable_wait=1.0)
        t0 = time.monotonic()
        try:
            with pytest.raises(InferenceUnavailable) as info:  # (not hang: fail after 30 s)
                await asyncio.wait_for(sm.chat_completion(messages=PROMPT, max_tokens=16), 30)
            return str(info.value), time.monotonic() - t0
        finally:
            await sm.close()

    with SilentServer() as silent:
        message, took = asyncio.run(go(silent.base_url))
        assert silent.accepted >= 1
    assert silent.base_url in message and "answered nothing" in message and "1s" in message
    assert took < 15  # the wait plus one health probe, not the request timeout (124 s here)


def test_a_slow_server_that_answers_its_probes_is_not_declared_dead(tok_dir):
    def slow(prompt_text: str, body: dict) -> str:
        time.sleep(1.5)
        return "seven"

    async def go(url: str) -> str:
        sm = ServerManager([_cfg(url)], unavailable_wait=0.5)
        try:
            out = await sm.chat_completion(messages=PROMPT, max_tokens=16)
            return out.choices[0].message.content
        finally:
            await sm.close()

    with FakeOpenAIServer(tokenizer=tok_dir, responder=slow) as fake:
        assert asyncio.run(go(fake.base_url)) == "seven"


def test_the_manager_says_slow_for_a_live_server_and_not_for_a_dead_port(tok_dir):
    def slow(prompt_text: str, body: dict) -> str:
        time.sleep(3)
        return "seven"

    async def go(url: str) -> InferenceUnavailable:
        cfg = _cfg(url, timeout_base=0.3, min_tokens_per_second=100, max_retries=1)
        sm = ServerManager([cfg], unavailable_wait=0.5)
        try:
            with pytest.raises(InferenceUnavailable) as info:
                await asyncio.wait_for(sm.chat_completion(messages=PROMPT, max_tokens=5), 30)
            return info.value
        finally:
            await sm.close()

    with FakeOpenAIServer(tokenizer=tok_dir, responder=slow) as fake:
        alive = asyncio.run(go(fake.base_url))
    assert alive.slow and "answers its health probe" in str(alive), str(alive)
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        dead_url = f"http://127.0.0.1:{s.getsockname()[1]}/v1"
    dead = asyncio.run(go(dead_url))
    assert not dead.slow and "answers its health probe" not in str(dead), str(dead)
