"""ServerManager and backends against real fake servers over loopback HTTP."""

from __future__ import annotations

import asyncio
import time

import pytest

from atroposlib.errors import InferenceError
from atroposlib.inference_clients.backends.scripted import ScriptedServer
from atroposlib.inference_clients.config import APIServerConfig
from atroposlib.inference_clients.server_manager import ServerManager
from atroposlib.testing.fake_server import FakeOpenAIServer, fake_logprob
from atroposlib.type_definitions import MASK_IGNORE
from atroposlib.utils.tokenizer_loading import load_tokenizer
from tests.envs.conftest import answer_responder


def _cfg(url: str, server_type: str = "vllm", **kw) -> APIServerConfig:
    return APIServerConfig(
        base_url=url,
        server_type=server_type,
        model_name="tiny",
        api_key="x",
        health_check_interval=0.2,
        **kw,
    )


def test_vllm_chat_and_token_completion(fake_server, tok_dir):
    tok = load_tokenizer(str(tok_dir))

    async def go():
        sm = ServerManager([_cfg(fake_server.base_url)])
        try:
            chat = await sm.chat_completion(
                messages=[{"role": "user", "content": "What is 3+4?"}], n=4
            )
            prompt_ids = tok.encode("What is", add_special_tokens=False)
            p, outs, lps, reasons = await sm.tokens_and_logprobs_completion(
                input_ids=prompt_ids, n=2, max_tokens=3
            )
            return chat, p, outs, lps, reasons
        finally:
            await sm.close()

    chat, p, outs, lps, reasons = asyncio.run(go())
    assert [c.message.content for c in chat.choices] == [
        answer_responder("", {"choice_index": i}) for i in range(4)
    ]
    assert p == tok.encode("What is", add_special_tokens=False)
    assert all(len(o) == 3 for o in outs) and reasons == ["length", "length"]
    assert lps[0] == [fake_logprob(t, len(p) + j) for j, t in enumerate(outs[0])]


def test_managed_server_tracks_tokens_masks_logprobs_across_turns(fake_server, tok_dir):
    tok = load_tokenizer(str(tok_dir))
    turn1 = [{"role": "user", "content": "What is 3+4?"}]

    async def go():
        sm = ServerManager([_cfg(fake_server.base_url)])
        try:
            async with sm.managed_server(tokenizer=tok) as managed:
                first = await managed.chat_completion(messages=turn1, n=1, max_tokens=64)
                node1 = managed.get_state()["nodes"][0]
                turn2 = turn1 + [
                    {"role": "assistant", "content": first.choices[0].message.content},
                    {"role": "user", "content": "Are you sure?"},
                ]
                await managed.chat_completion(messages=turn2, n=1, max_tokens=64)
                nodes = managed.get_state()["nodes"]
            return node1, nodes, turn2
        finally:
            await sm.close()

    node1, nodes, turn2 = asyncio.run(go())
    prompt1 = tok.encode(
        tok.apply_chat_template(turn1, tokenize=False, add_generation_prompt=True),
        add_special_tokens=False,
    )
    assert node1.tokens[: len(prompt1)] == prompt1
    assert node1.masked_tokens[: len(prompt1)] == [MASK_IGNORE] * len(prompt1)
    gen1 = node1.tokens[len(prompt1) :]
    assert node1.masked_tokens[len(prompt1) :] == gen1 and gen1[-1] == tok.eos_token_id
    assert node1.logprobs[len(prompt1) :] == [
        fake_logprob(t, len(prompt1) + j) for j, t in enumerate(gen1)
    ]
    assert len(nodes) == 1  # the extended conversation replaced its parent
    node2 = nodes[0]
    assert node2.tokens[: len(node1.tokens)] == node1.tokens  # no re-tokenization drift
    assert node2.masked_tokens[: len(node1.tokens)] == node1.masked_tokens
    full2 = tok.encode(
        tok.apply_chat_template(turn2, tokenize=False, add_generation_prompt=True),
        add_special_tokens=False,
    )
    user2 = node2.tokens[len(node1.tokens) : len(full2)]
    assert node2.tokens[: len(full2)] == full2
    assert node2.masked_tokens[len(node1.tokens) : len(full2)] == [MASK_IGNORE] * len(user2)
    assert all(
        m == t
        for m, t in zip(node2.masked_tokens[len(full2) :], node2.tokens[len(full2) :], strict=True)
    )


def test_failover_when_a_server_dies_mid_run(tok_dir):
    def slow_a(prompt_text: str, body: dict) -> str:
        time.sleep(0.5)
        return "from a"

    a = FakeOpenAIServer(tokenizer=tok_dir, responder=slow_a).start()
    b = FakeOpenAIServer(tokenizer=tok_dir, responses=["from b"]).start()

    async def go():
        sm = ServerManager([_cfg(a.base_url, max_retries=2), _cfg(b.base_url, max_retries=2)])
        try:
            first = await asyncio.gather(
                *[
                    sm.chat_completion(messages=[{"role": "user", "content": "hi"}])
                    for _ in range(6)
                ]
            )
            in_flight = [
                asyncio.create_task(
                    sm.chat_completion(messages=[{"role": "user", "content": "hi"}])
                )
                for _ in range(8)
            ]
            await asyncio.sleep(0.2)
            await asyncio.to_thread(a.stop)  # dies with requests in flight
            after = await asyncio.gather(*in_flight)
            return first, after, sm.servers[0].server_healthy
        finally:
            await sm.close()

    try:
        first, after, a_healthy = asyncio.run(go())
    finally:
        a.stop()
        b.stop()
    assert {r.choices[0].message.content for r in first} == {
        "from a",
        "from b",
    }  # least-loaded spreads load
    assert len(after) == 8 and all(
        r.choices[0].message.content in ("from a", "from b") for r in after
    )
    assert a_healthy is False
    assert len([r for r in b.requests]) >= 3 + 4  # b took its share and the failed-over requests


def test_retries_a_503_and_splits_large_n(fake_server):
    fake_server.fail_next(1, 503)

    async def go():
        sm = ServerManager([_cfg(fake_server.base_url)], max_n_completions=3)
        try:
            return await sm.chat_completion(messages=[{"role": "user", "content": "hi"}], n=7)
        finally:
            await sm.close()

    out = asyncio.run(go())
    assert len(out.choices) == 7 and [c.index for c in out.choices] == list(range(7))
    gen = [r for r in fake_server.requests if "messages" in r]
    # 7 is split 3 + 3 + 1, sent together; the 503 hits whichever arrives first, and that one is
    # retried with the same n
    sizes = sorted(r["n"] for r in gen)
    assert sizes in ([1, 1, 3, 3], [1, 3, 3, 3]), sizes


def test_client_errors_are_not_retried(fake_server):
    fake_server.fail_next(1, 400)

    async def go():
        sm = ServerManager([_cfg(fake_server.base_url)])
        try:
            await sm.chat_completion(messages=[{"role": "user", "content": "hi"}])
        finally:
            await sm.close()

    with pytest.raises(InferenceError, match="400"):
        asyncio.run(go())
    assert len(fake_server.requests) == 1


def test_openai_backend_is_text_only(fake_server, tok_dir):
    tok = load_tokenizer(str(tok_dir))

    async def go():
        sm = ServerManager([_cfg(fake_server.base_url, server_type="openai")])
        try:
            out = await sm.chat_completion(messages=[{"role": "user", "content": "hi"}], n=2)
            with pytest.raises(NotImplementedError, match="server_type vllm"):
                async with sm.managed_server(tokenizer=tok):
                    pass
            return out
        finally:
            await sm.close()

    out = asyncio.run(go())
    assert len(out.choices) == 2 and out.choices[0].message.content


def test_sglang_backend_uses_native_generate(fake_server, tok_dir):
    tok = load_tokenizer(str(tok_dir))

    async def go():
        sm = ServerManager([_cfg(fake_server.base_url, server_type="sglang")])
        try:
            async with sm.managed_server(tokenizer=tok) as managed:
                out = await managed.completion(prompt="What is 2+2?", n=2, max_tokens=50)
                return out, managed.get_state()["nodes"]
        finally:
            await sm.close()

    out, nodes = asyncio.run(go())
    native = [r for r in fake_server.requests if "sampling_params" in r]
    assert native and native[0]["return_logprob"] is True and len(native[0]["input_ids"]) == 2
    assert len(nodes) == 2 and out.choices[0].text == answer_responder("", {"choice_index": 0})
    prompt = tok.encode("What is 2+2?")
    assert nodes[0].tokens[: len(prompt)] == prompt
    assert len(nodes[0].logprobs) == len(nodes[0].tokens) == len(nodes[0].masked_tokens)


def test_a_bare_server_root_means_its_v1_routes(fake_server):
    root = fake_server.base_url[: -len("/v1")]

    async def go():
        sm = ServerManager([_cfg(root)])
        try:
            return await sm.completion(prompt="hi", n=1, max_tokens=4)
        finally:
            await sm.close()

    assert asyncio.run(go()).choices[0].text


def test_thinking_settings_reach_the_servers(fake_server):
    async def go():
        vllm = ServerManager([_cfg(fake_server.base_url)])
        oai = ServerManager([_cfg(fake_server.base_url, server_type="openai")])
        vllm.set_reasoning(thinking_mode=True)
        oai.set_reasoning(reasoning_effort="low")
        try:
            await vllm.chat_completion(messages=[{"role": "user", "content": "hi"}])
            await vllm.chat_completion(
                messages=[{"role": "user", "content": "hi"}], skip_reasoning=True
            )
            await oai.chat_completion(messages=[{"role": "user", "content": "hi"}])
        finally:
            await vllm.close()
            await oai.close()

    asyncio.run(go())
    first, second, third = [r for r in fake_server.requests if "messages" in r]
    assert first["chat_template_kwargs"] == {"enable_thinking": True}
    assert "chat_template_kwargs" not in second and "skip_reasoning" not in second
    assert third["reasoning_effort"] == "low"


def test_every_request_kind_goes_through_one_prelude(fake_server):
    """Chat, completion and token requests alike: ``split`` and ``skip_reasoning`` stay ours, the
    configured model is named, and only a chat request carries the thinking settings."""

    async def go():
        sm = ServerManager([_cfg(fake_server.base_url)])
        sm.set_reasoning(thinking_mode=True)
        ours = {"split": "eval", "skip_reasoning": False, "max_tokens": 2}
        try:
            await sm.chat_completion(messages=[{"role": "user", "content": "hi"}], **ours)
            await sm.completion(prompt="hi", **ours)
            await sm.tokens_and_logprobs_completion(prompt="hi", **ours)
        finally:
            await sm.close()

    asyncio.run(go())
    chat, completion, tokens = fake_server.requests
    for body in (chat, completion, tokens):
        assert "split" not in body and "skip_reasoning" not in body
        assert body["model"] == "tiny"
    assert chat["chat_template_kwargs"] == {"enable_thinking": True}
    assert "chat_template_kwargs" not in completion and "chat_template_kwargs" not in tokens
    assert tokens["return_token_ids"] is True


def test_max_reasoning_tokens_reaches_the_server_as_vllms_thinking_budget(fake_server, caplog):
    """The env flag had no reader: setting it changed nothing."""
    import logging

    async def go():
        vllm = ServerManager([_cfg(fake_server.base_url)])
        oai = ServerManager([_cfg(fake_server.base_url, server_type="openai")])
        vllm.set_reasoning(thinking_mode=True, max_reasoning_tokens=64)
        oai.set_reasoning(reasoning_effort="low", max_reasoning_tokens=64)
        try:
            await vllm.chat_completion(messages=[{"role": "user", "content": "hi"}])
            for _ in range(2):
                await oai.chat_completion(messages=[{"role": "user", "content": "hi"}])
        finally:
            await vllm.close()
            await oai.close()

    with caplog.at_level(logging.WARNING):
        asyncio.run(go())
    first, *others = [r for r in fake_server.requests if "messages" in r]
    assert first["thinking_token_budget"] == 64
    assert all("thinking_token_budget" not in r for r in others)  # OpenAI has no such field...
    said = [r for r in caplog.records if "max_reasoning_tokens" in r.getMessage()]
    assert len(said) == 1  # ...which is said once


def test_testing_mode_uses_the_scripted_in_process_backend():
    sm = ServerManager([], testing=True)
    assert [type(s) for s in sm.servers] == [ScriptedServer]
    chat = asyncio.run(sm.chat_completion(messages=[{"role": "user", "content": "hi"}], n=2))
    assert [c.message.content for c in chat.choices] == ["This is a scripted test response."] * 2
