"""Tool calls through ``managed_server`` (Atropos's ``tool_parser``), sampled from our CPU engine.

A tiny model is taught two replies (``atroposlib.testing.taught_model``): a Hermes ``<tool_call>``
for the question rendered with the tools, then a plain answer once the tool's result is in the
conversation. The real engine serves it; Atropos's calls (``server.tool_parser = "hermes"``,
``managed.chat_completion(tools=..., tool_choice=...)``) must give the call in
``message.tool_calls`` and exact tokens, masks and logprobs in the tracked node, over both turns.
Also: ``tool_choice="none"``, no parser, ``managed_server(base_url=...)``,
``preserve_think_blocks`` and the managed-server proxy (``proxy_url``).
"""

from __future__ import annotations

import json
import logging
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
import uvicorn
from transformers import AutoTokenizer

from atroposlib.envs.server_handling.managed_server_proxy import create_app
from atroposlib.envs.server_handling.server_baseline import APIServerConfig
from atroposlib.envs.server_handling.server_manager import ServerManager
from atroposlib.testing import FakeOpenAIServer, tiny_tokenizer_dir
from atroposlib.testing.taught_model import build_taught_model
from atroposlib.utils.net import free_port, wait_for_http
from tests.compat.helpers import run_coro

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Weather of a city",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
        },
    }
]
CALL = '<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}</tool_call>'
ANSWER = "It is sunny in Paris."
TURN1 = [
    {"role": "system", "content": "You are helpful."},
    {"role": "user", "content": "Weather in Paris?"},
]
RESULT = {"role": "tool", "content": '{"sky": "sunny"}'}


def taught_replies() -> list[tuple[list[dict], str]]:
    """Turn 1 -> the call; turn 2 (the call replayed as the model wrote it + the result) -> answer."""
    turn2 = [*TURN1, {"role": "assistant", "content": CALL}, RESULT]
    return [(TURN1, CALL), (turn2, ANSWER)]


@pytest.fixture(scope="module")
def taught_dir(tmp_path_factory) -> Path:
    return build_taught_model(tmp_path_factory.mktemp("taught") / "model", taught_replies(), TOOLS)


@pytest.fixture(scope="module")
def engine(taught_dir: Path, tmp_path_factory) -> Iterator[str]:
    """Our CPU engine serving the taught model as ``tiny``."""
    port = free_port()
    log = open(tmp_path_factory.mktemp("engine") / "engine.log", "wb")
    cmd = [sys.executable, "-m", "atroposlib.cli.serve_model", "--model", str(taught_dir)]
    cmd += ["--host", "127.0.0.1", "--port", str(port), "--torch-threads", "1"]
    proc = subprocess.Popen(
        [*cmd, "--served-model-name", "tiny"], stdout=log, stderr=subprocess.STDOUT
    )
    try:
        wait_for_http(f"http://127.0.0.1:{port}/health", timeout=120, proc=proc)
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        proc.terminate()
        proc.wait(30)
        log.close()


def _manager(url: str) -> ServerManager:
    return ServerManager(
        [APIServerConfig(base_url=url, model_name="tiny", server_type="vllm", health_check=False)]
    )


def test_hermes_tool_call_sampled_through_managed_server(engine, taught_dir):
    tok = AutoTokenizer.from_pretrained(str(taught_dir))
    server = _manager(engine)
    server.tool_parser = "hermes"  # what Atropos's t1 env does after BaseEnv.__init__

    async def episode():
        async with server.managed_server(tokenizer=tok) as managed:
            assert managed._tool_parser_name == "hermes"
            first = await managed.chat_completion(
                messages=TURN1, tools=TOOLS, tool_choice="auto", max_tokens=96, temperature=0.0
            )
            after_first = managed.get_state()["nodes"]
            choice = first.choices[0]
            calls = choice.message.tool_calls
            turn2 = [
                *TURN1,
                {"role": "assistant", "content": choice.message.content, "tool_calls": calls},
                {**RESULT, "tool_call_id": calls[0]["id"] if calls else ""},
            ]
            second = await managed.chat_completion(
                messages=turn2, tools=TOOLS, max_tokens=96, temperature=0.0
            )
            return first, after_first, second, managed.get_state()["nodes"]

    first, after_first, second, nodes = run_coro(episode())
    choice = first.choices[0]
    assert choice.finish_reason == "tool_calls"
    assert choice.message.content is None  # nothing before the call
    [call] = choice.message.tool_calls
    assert call["type"] == "function" and call["function"]["name"] == "get_weather"
    assert json.loads(call["function"]["arguments"]) == {"city": "Paris"}
    assert call.function.name == "get_weather" and call.id.startswith("call_")

    # the tracked node: the prompt rendered with the tools, then exactly the generated tokens
    prompt = tok.apply_chat_template(TURN1, tools=TOOLS, tokenize=False, add_generation_prompt=True)
    prompt_ids = tok.encode(prompt, add_special_tokens=False)
    reply_ids = tok.encode(CALL, add_special_tokens=False) + [tok.eos_token_id]
    [node] = after_first
    assert "<tools>" in prompt and '"get_weather"' in prompt
    assert node.tokens == prompt_ids + reply_ids
    assert node.masked_tokens == [-100] * len(prompt_ids) + reply_ids
    assert node.logprobs[: len(prompt_ids)] == [1.0] * len(prompt_ids)
    assert len(node.logprobs) == len(node.tokens)
    assert all(lp <= 0 for lp in node.logprobs[len(prompt_ids) :])

    # turn 2: the call went back as the exact text, so the node was extended, not re-tokenized
    answer = second.choices[0]
    assert answer.message.content == ANSWER and answer.message.tool_calls is None
    assert answer.finish_reason == "stop"
    [extended] = nodes
    assert extended.tokens[: len(node.tokens)] == node.tokens
    assert extended.masked_tokens[: len(node.tokens)] == node.masked_tokens  # call stays trained
    answer_ids = tok.encode(ANSWER, add_special_tokens=False) + [tok.eos_token_id]
    assert extended.tokens[-len(answer_ids) :] == answer_ids
    result_span = extended.masked_tokens[len(node.tokens) : -len(answer_ids)]
    assert result_span and set(result_span) == {-100}  # the tool's output is not trained


def test_tool_choice_none_and_no_parser(engine, taught_dir, caplog):
    tok = AutoTokenizer.from_pretrained(str(taught_dir))

    async def ask(parser, choice):
        server = _manager(engine)
        server.tool_parser = parser
        async with server.managed_server(tokenizer=tok) as managed:
            kwargs = {"tool_choice": choice} if choice else {}
            out = await managed.chat_completion(
                messages=TURN1, tools=TOOLS, max_tokens=96, temperature=0.0, **kwargs
            )
        await server.close()
        return out

    unparsed = run_coro(ask("hermes", "none")).choices[0]  # tools rendered, reply not parsed
    assert unparsed.message.content == CALL and unparsed.message.tool_calls is None
    assert unparsed.finish_reason == "stop"
    with caplog.at_level(logging.WARNING):
        ignored = run_coro(ask(None, None)).choices[0]  # Atropos: no parser, tools ignored
    assert ignored.message.tool_calls is None
    assert "no tool_parser is set" in caplog.text


def test_base_url_pins_the_session(engine, taught_dir):
    tok = AutoTokenizer.from_pretrained(str(taught_dir))
    with FakeOpenAIServer(tokenizer=taught_dir, responses=["from the fake"]) as fake:

        async def ask(url):
            server = ServerManager(
                [
                    APIServerConfig(base_url=fake.base_url, model_name="tiny", server_type="vllm"),
                    APIServerConfig(base_url=engine, model_name="tiny", server_type="vllm"),
                ]
            )
            try:
                async with server.managed_server(tokenizer=tok, base_url=url) as managed:
                    out = await managed.chat_completion(messages=TURN1, max_tokens=8, temperature=0)
                    return out.choices[0].message.content
            finally:
                await server.close()

        assert run_coro(ask(fake.base_url + "/")) == "from the fake"
        before = len(fake.requests)
        run_coro(ask(engine))
        assert len(fake.requests) == before  # the engine answered, not the fake
        with pytest.raises(ValueError, match="no such server"):
            run_coro(ask("http://127.0.0.1:1/v1"))


def test_preserve_think_blocks_keeps_replayed_reasoning():
    """A template that drops old ``<think>`` blocks (as Qwen3's does) re-renders turn 1 differently
    from the tokens the model saw: a token drift. By default the episode stays one node of exact
    tokens and the drift is counted; ``preserve_think_blocks=True`` keeps the blocks in the
    rendering (no drift); ``on_token_drift="split"`` is the old behaviour (a second node)."""
    tok = AutoTokenizer.from_pretrained(str(tiny_tokenizer_dir()))
    tok.chat_template = (
        "{% for m in messages %}<|im_start|>{{ m['role'] }}\n"
        "{% if m['role'] == 'assistant' %}{{ m['content'].split('</think>')[-1] }}"
        "{% else %}{{ m['content'] }}{% endif %}<|im_end|>\n{% endfor %}"
        "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
    )
    reply = "<think>two and two</think>four"
    with FakeOpenAIServer(tokenizer=tok, responses=[reply]) as fake:

        async def two_turns(preserve, mode=None):
            server = _manager(fake.base_url)
            opts = {"on_token_drift": mode} if mode else {}
            async with server.managed_server(
                tokenizer=tok, preserve_think_blocks=preserve, **opts
            ) as m:
                msgs = [{"role": "user", "content": "2+2?"}]
                out = await m.chat_completion(messages=msgs, max_tokens=32)
                msgs += [{"role": "assistant", "content": out.choices[0].message.content}]
                await m.chat_completion(messages=[*msgs, {"role": "user", "content": "sure?"}])
                nodes = m.get_state()["nodes"]
            await server.close()
            return nodes, dict(server.managed_stats.drifts)

        nodes, drifts = run_coro(two_turns(True))
        assert len(nodes) == 1 and drifts == {}
        [exact], drifts = run_coro(two_turns(False))
        assert drifts == {"template": 1}
        think = tok.encode("<think>two and two</think>", add_special_tokens=False)
        trained = [t for t, m in zip(exact.tokens, exact.masked_tokens, strict=True) if m != -100]
        assert trained[: len(think)] == think  # turn 1's reasoning is still trained
        split, drifts = run_coro(two_turns(False, "split"))
        assert len(split) == 2 and drifts == {"template": 1}  # the template's rendering, as before


def test_proxy_url_sessions_run_on_the_proxy():
    tok = AutoTokenizer.from_pretrained(str(tiny_tokenizer_dir()))
    with FakeOpenAIServer(tokenizer=tok, responses=[CALL]) as fake:
        port = free_port()
        app = create_app(_manager(fake.base_url), tok, model_name="tiny")
        config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning")
        proxy = uvicorn.Server(config)
        thread = threading.Thread(target=proxy.run, daemon=True)
        thread.start()
        try:
            wait_for_http(f"http://127.0.0.1:{port}/health", timeout=30)
            server = ServerManager(
                [APIServerConfig(base_url=fake.base_url, model_name="tiny", server_type="vllm")],
                proxy_url=f"http://127.0.0.1:{port}",
            )
            assert server.use_proxy

            async def ask():
                async with server.managed_server(tokenizer=tok) as managed:
                    assert managed.get_url().startswith(f"http://127.0.0.1:{port}/")
                    out = await managed.chat_completion(messages=TURN1, tools=TOOLS, n=2)
                    return out, managed.get_state()["nodes"]

            out, nodes = run_coro(ask())
            assert [c.message.tool_calls[0]["function"]["name"] for c in out.choices] == [
                "get_weather"
            ] * 2
            assert len(nodes) == 2 and all(n.masked_tokens[-1] != -100 for n in nodes)
        finally:
            proxy.should_exit = True
            thread.join(10)
    with pytest.raises(ValueError, match="proxy_url"):
        bare = ServerManager(
            [APIServerConfig(base_url="http://127.0.0.1:1/v1", server_type="vllm")], use_proxy=True
        )

        async def open_session():
            async with bare.managed_server():
                pass

        run_coro(open_session())
