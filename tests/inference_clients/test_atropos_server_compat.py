"""Atropos's server-side names with real behaviour: ReasoningConfig, ServerHarness, the tool-call
translator, and the managed-server proxy over real HTTP (uvicorn on loopback, in front of the fake
vLLM-protocol server)."""

from __future__ import annotations

import json
import threading

import httpx
import pytest
import uvicorn
from transformers import AutoTokenizer

from atroposlib.envs.server_handling.managed_server_proxy import create_app
from atroposlib.envs.server_handling.server_baseline import APIServerConfig, ReasoningConfig
from atroposlib.envs.server_handling.server_harness import ServerHarness, create_chat_completion
from atroposlib.envs.server_handling.server_manager import ServerManager
from atroposlib.envs.server_handling.tool_call_translator import ToolCallTranslator
from atroposlib.testing import FakeOpenAIServer, tiny_tokenizer_dir
from atroposlib.utils.net import free_port, wait_for_http
from tests.compat.helpers import run_coro

TOOLS = [{"type": "function", "function": {"name": "calc", "parameters": {}}}]
CALL = '<tool_call>{"name": "calc", "arguments": {"x": 2}}</tool_call>'


@pytest.fixture(scope="module")
def tok():
    return AutoTokenizer.from_pretrained(str(tiny_tokenizer_dir()))


def test_reasoning_config():
    assert ReasoningConfig().build_extra_body() is None
    effort = ReasoningConfig(effort="high")
    assert effort.enabled
    assert effort.build_extra_body("https://api.openai.com/v1") == {"reasoning_effort": "high"}
    assert effort.build_extra_body("http://x/v1") == {
        "reasoning": {"enabled": True, "effort": "high"}
    }
    assert effort.build_extra_body("http://x/v1", use_max_tokens=True) == {
        "reasoning": {"enabled": True, "max_tokens": 25600}
    }
    assert ReasoningConfig(max_tokens=500).build_extra_body() == {
        "reasoning": {"enabled": True, "max_tokens": 500}
    }
    with pytest.raises(ValueError):
        ReasoningConfig(effort="extreme")

    class Cfg:
        thinking_mode = True
        reasoning_effort = None

    assert ReasoningConfig.from_env_config(Cfg()).enabled


def test_server_harness_answers_what_was_scripted():
    h = ServerHarness()
    msgs = [{"role": "user", "content": "hi"}]
    h.set_desired_response(msgs, create_chat_completion(["hello", "hey"]))
    out = run_coro(h.chat_completion(messages=msgs))
    assert [c.message.content for c in out.choices] == ["hello", "hey"]
    with pytest.raises(KeyError, match="no scripted response"):
        run_coro(h.chat_completion(messages=[{"role": "user", "content": "other"}]))


def test_tool_call_translator_round_trip(tok):
    tr = ToolCallTranslator(tokenizer=tok, parser_name="hermes")
    raw = "<think>need calc</think>\n" + CALL
    content, calls, reason = tr.parse_model_output(raw, tool_choice="auto", tools=TOOLS)
    assert reason == "tool_calls" and content == "<think>need calc</think>"
    assert calls[0].function.name == "calc" and json.loads(calls[0].function.arguments) == {"x": 2}
    assert tr.parse_model_output(raw, tool_choice="none", tools=TOOLS) == (raw, None, "stop")
    assert tr.parse_model_output("plain", tools=TOOLS) == ("plain", None, "stop")
    # the exact raw text comes back for a known call id; a foreign call is rebuilt
    known = {"role": "assistant", "content": None, "tool_calls": [calls[0].model_dump()]}
    foreign = {
        "role": "assistant",
        "content": "pre",
        "tool_calls": [{"id": "x", "function": {"name": "calc", "arguments": '{"x": 3}'}}],
    }
    out = tr.convert_messages_for_template([{"role": "user", "content": "q"}, known, foreign])
    assert out[1] == {"role": "assistant", "content": raw}
    assert (
        out[2]["content"] == 'pre\n<tool_call>{"name": "calc", "arguments": {"x": 3}}</tool_call>'
    )
    with pytest.warns(UserWarning, match="needs vLLM"):
        other = ToolCallTranslator(tokenizer=tok, parser_name="mistral")
    assert other.parse_model_output(raw, tools=TOOLS) == (raw, None, "stop")


def test_managed_server_proxy_over_http(tok):
    def reply(prompt_text: str, body: dict) -> str:
        return CALL if "calculator" in prompt_text else "just text"

    with FakeOpenAIServer(tokenizer=tok, responder=reply) as fake:
        manager = ServerManager(
            [APIServerConfig(base_url=fake.base_url, model_name="tiny", server_type="vllm")]
        )
        port = free_port()
        server = uvicorn.Server(
            uvicorn.Config(
                create_app(manager, tok, model_name="tiny"),
                host="127.0.0.1",
                port=port,
                log_level="warning",
                lifespan="off",
            )
        )
        thread = threading.Thread(target=server.run, daemon=True)
        thread.start()
        try:
            base = f"http://127.0.0.1:{port}"
            wait_for_http(base + "/health", timeout=30)
            h = httpx.Client(base_url=base, timeout=30)
            assert h.get("/v1/models").json()["data"][0]["id"] == "tiny"
            sid = h.post("/sessions/create", json={}).json()["uuid"]
            body = {
                "messages": [{"role": "user", "content": "use the calculator"}],
                "tools": TOOLS,
                "max_tokens": 64,
            }
            out = h.post(f"/{sid}/v1/chat/completions", json=body).json()
            choice = out["choices"][0]
            assert choice["finish_reason"] == "tool_calls"
            assert choice["message"]["tool_calls"][0]["function"]["name"] == "calc"
            nodes = h.get(f"/{sid}/nodes").json()["nodes"]
            assert len(nodes) == 1
            node = nodes[0]
            assert len(node["tokens"]) == len(node["masked_tokens"]) == len(node["logprobs"])
            generated = [t for t in node["masked_tokens"] if t != -100]
            assert tok.decode(generated, skip_special_tokens=True) == CALL
            rendered = h.post(f"/{sid}/v1/chat/completions/render", json=body).json()
            assert rendered["num_tokens"] == len(rendered["token_ids"]) > 0
            assert h.get("/sessions").json()["sessions"][0]["num_nodes"] == 1
            empty = h.post(f"/{sid}/v1/chat/completions", json={"messages": []})
            assert empty.status_code == 400 and "messages" in empty.json()["error"]["message"]
            assert h.delete(f"/{sid}").status_code == 200
            missing = h.get(f"/{sid}/nodes")
            assert missing.status_code == 404 and "not found" in missing.json()["error"]["message"]
        finally:
            server.should_exit = True
            thread.join(10)


def test_server_manager_takes_atropos_reasoning_config(tok):
    async def ask(url: str):
        manager = ServerManager(
            [APIServerConfig(base_url=url, model_name="tiny", api_key="x")],
            reasoning_config=ReasoningConfig(effort="low"),
        )
        try:
            await manager.chat_completion(messages=[{"role": "user", "content": "hi"}], n=1)
        finally:
            await manager.close()

    with FakeOpenAIServer(tokenizer=tok) as fake:
        run_coro(ask(fake.base_url))
        sent = fake.requests[-1]
    assert sent["reasoning_effort"] == "low"
