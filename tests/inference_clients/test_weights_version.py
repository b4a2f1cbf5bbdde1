"""Weights versions as the servers report them: bracketed by vLLM's dev-mode ``/weight_info`` around a
request, stamped by SGLang's ``meta_info``, carried through the server manager, the managed server and
an item's ``GenerationLog``; a logprob the server did not give is never 0.0."""

from __future__ import annotations

import asyncio
import math

import pytest

from atroposlib.inference_clients.config import APIServerConfig
from atroposlib.inference_clients.generation_log import GenerationLog, item_log
from atroposlib.inference_clients.server_manager import ServerManager
from atroposlib.inference_clients.weights_version import (
    TokenResult,
    VersionProbe,
    parse_version,
    span_from_stamps,
    span_of_labels,
)
from atroposlib.testing.fake_server import FakeOpenAIServer


def _manager(fake: FakeOpenAIServer, server_type: str = "vllm") -> ServerManager:
    return ServerManager(
        [APIServerConfig(base_url=fake.base_url, model_name=fake.model, server_type=server_type)]
    )


def test_labels_and_stamps_parse_to_trainer_steps():
    assert parse_version("12") == 12 and parse_version(3) == 3
    assert parse_version("default") is None and parse_version(-1) is None
    assert parse_version(True) is None and parse_version(None) is None
    stamps = [{"version": "4", "start": 0, "end": 3}, {"version": "5", "start": 3, "end": 9}]
    assert span_from_stamps(stamps) == (4, 5)
    assert span_from_stamps(None) is None and span_of_labels(["default"]) is None
    result = TokenResult([1], [[2], [3]], [[-0.1], [-0.2]], ["stop", "stop"], [(1, 1), None])
    prompt, outs, lps, reasons = result  # still unpacks as Atropos's 4-tuple
    assert outs == [[2], [3]] and result.versions == [(1, 1), None]


def test_probe_reads_after_answers_and_shares_a_read_that_started_after_them():
    reads: list[int] = []
    current = {"v": 3}

    async def read():
        seen = current["v"]  # what the server answers is its version when the read reaches it
        reads.append(seen)
        await asyncio.sleep(0.05)
        return seen

    async def run():
        probe = VersionProbe(read)
        assert probe.lower() is None  # nothing read yet: no request is delayed by a read
        assert await probe.upper() == 3
        current["v"] = 4
        # three answers arrive together: one read serves them all
        assert await asyncio.gather(probe.upper(), probe.upper(), probe.upper()) == [4, 4, 4]
        assert probe.lower() == 4 and len(reads) == 2
        # an answer that arrives while a read is under way waits for a read started after it
        first = asyncio.ensure_future(probe.upper())
        await asyncio.sleep(0.01)
        current["v"] = 5
        second = await probe.upper()
        assert await first == 4 and second == 5 and len(reads) == 4
        # before a request: the newest read stands while it is recent, else a fresh one is made
        current["v"] = 6
        assert await probe.recent_lower(60.0) == 5 and len(reads) == 4
        assert probe.read_at is not None
        probe.read_at -= 120
        assert await probe.recent_lower(60.0) == 6 and len(reads) == 5

    asyncio.run(run())

    async def unsupported():
        async def missing():
            raise LookupError("404")

        probe = VersionProbe(missing)
        assert await probe.upper() is None and probe.supported is False
        assert await probe.upper() is None  # not asked again

    asyncio.run(unsupported())


def test_vllm_dev_mode_versions_are_bracketed_around_each_request(tok_dir):
    flips: list[str] = []

    def responder(prompt: str, body: dict) -> str:
        if flips:  # a refresh lands while this request is generated
            fake.weights_version = flips.pop()
        return "The answer is 4."

    with FakeOpenAIServer(tokenizer=tok_dir, responder=responder, weights_version="3") as fake:

        async def run():
            manager = _manager(fake)
            log = GenerationLog()
            item_log.set(log)
            first = await manager.tokens_and_logprobs_completion(input_ids=[5, 6, 7], n=2)
            assert first.versions == [(3, 3), (3, 3)]
            flips.append("4")
            second = await manager.tokens_and_logprobs_completion(input_ids=[5, 6, 7])
            assert second.versions == [(3, 4)]  # both ends: generated across the refresh
            chat = await manager.chat_completion(messages=[{"role": "user", "content": "hi"}])
            assert chat.choices and log.span == (3, 4) and log.unknown_versions == 0
            await manager.close()

        asyncio.run(run())
        # one version read after each answer, none before a request
        assert sum(1 for r in fake.requests if "prompt" in r or "messages" in r) == 3


def test_a_server_without_versions_says_so_and_is_not_asked_again(fake_server):
    async def run():
        manager = _manager(fake_server)
        log = GenerationLog()
        item_log.set(log)
        for _ in range(2):
            out = await manager.tokens_and_logprobs_completion(input_ids=[5, 6, 7])
            assert out.versions == [None]
        assert log.span is None and log.unknown_versions == 2
        assert manager.servers[0].versions.supported is False
        await manager.close()

    asyncio.run(run())


@pytest.mark.parametrize("server_type", ["vllm", "sglang"])
def test_a_missing_token_logprob_is_unknown_not_zero(tok_dir, server_type):
    with FakeOpenAIServer(tokenizer=tok_dir, logprob_gaps=True, weights_version="2") as fake:

        async def run():
            manager = _manager(fake, server_type)
            log = GenerationLog()
            item_log.set(log)
            _, outs, lps, _ = out = await manager.tokens_and_logprobs_completion(
                input_ids=[5, 6, 7], max_tokens=8
            )
            assert math.isnan(lps[0][0]) and all(math.isfinite(v) for v in lps[0][1:])
            assert len(lps[0]) == len(outs[0]) and log.missing_logprobs == 1
            if server_type == "sglang":  # SGLang stamps its answers
                assert out.versions == [(2, 2)]
            await manager.close()

        asyncio.run(run())


def test_managed_nodes_carry_the_versions_of_all_their_turns(tok_dir):
    with FakeOpenAIServer(tokenizer=tok_dir, responses=["Hi."], weights_version="7") as fake:

        async def run():
            from transformers import AutoTokenizer

            tok = AutoTokenizer.from_pretrained(str(tok_dir))
            manager = _manager(fake)
            async with manager.managed_server(tokenizer=tok) as managed:
                msgs = [{"role": "user", "content": "hello"}]
                reply = await managed.chat_completion(messages=msgs, max_tokens=8)
                assert managed.get_state()["nodes"][0].weights_versions == [7, 7]
                fake.weights_version = "8"  # the trainer pushed step 8
                msgs += [
                    {"role": "assistant", "content": reply.choices[0].message.content},
                    {"role": "user", "content": "again"},
                ]
                await managed.chat_completion(messages=msgs, max_tokens=8)
                (node,) = managed.get_state()["nodes"]  # the extended node replaced its parent
                assert node.weights_versions == [7, 8]
            await manager.close()

        asyncio.run(run())
