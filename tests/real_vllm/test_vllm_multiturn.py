"""A multi-turn episode through ``managed_server`` against the real vLLM build is token-exact.

The client's tokenizer (the tiny model's, vLLM serves the same folder) gets a Qwen3-thinking-style
chat template: its generation prompt opens a ``<think>`` block and earlier assistant turns are
re-rendered without their reasoning, so re-rendering the history never gives the tokens the model
saw. Over three turns (an answer, a tool result, a user follow-up) the episode must stay one
sequence whose ids are exactly the prompt and completion ids vLLM returned (read off the HTTP
answers themselves), every generated token trained, every other token masked, the drift counted;
``on_token_drift="split"`` shows the old behaviour: the earlier turns end up untrained.
Uses the tier's shared plain server (``dev_vllm``): no vLLM start-up of its own.
"""

from __future__ import annotations

import asyncio
import itertools
from typing import Any

import httpx
import pytest
from transformers import AutoTokenizer

from atroposlib.inference_clients.config import APIServerConfig
from atroposlib.inference_clients.server_manager import ServerManager
from atroposlib.type_definitions import MASK_IGNORE
from tests.inference_clients.test_managed_multiturn import THINK_TEMPLATE, TURN1

pytestmark = pytest.mark.timeout(900)

FOLLOW_UPS = [{"role": "tool", "content": '{"sum": 5}'}, {"role": "user", "content": "And 4+4?"}]


async def _episode(url: str, model: str, tok: Any, mode: str):
    """Three turns in one managed session; returns the nodes, the counts and vLLM's answers."""
    server = ServerManager(
        [APIServerConfig(base_url=url, model_name=model, server_type="vllm", timeout=300)],
        on_token_drift=mode,
    )
    answers: list[dict[str, Any]] = []

    async def keep_answer(response: httpx.Response) -> None:
        if response.url.path.endswith("/completions"):
            await response.aread()
            answers.append(response.json())

    server.servers[0].http.event_hooks["response"].append(keep_answer)
    try:
        async with server.managed_server(tokenizer=tok) as managed:
            msgs = list(TURN1)
            for follow_up in [*FOLLOW_UPS, None]:
                out = await managed.chat_completion(
                    messages=msgs, max_tokens=10, temperature=1.0, seed=len(msgs)
                )
                msgs.append({"role": "assistant", "content": out.choices[0].message.content})
                if follow_up:
                    msgs.append(follow_up)
            return managed.get_state()["nodes"], server.managed_stats, answers
    finally:
        await server.close()


def _trained(node) -> list[int]:
    return [i for i, m in enumerate(node.masked_tokens) if m != MASK_IGNORE]


def test_multi_turn_episode_is_token_exact_against_vllm(dev_vllm, tiny_model_dir):
    tok = AutoTokenizer.from_pretrained(str(tiny_model_dir))
    tok.chat_template = THINK_TEMPLATE
    url = dev_vllm["plain"].url + "/v1"
    [node], stats, answers = asyncio.run(_episode(url, str(tiny_model_dir), tok, "keep"))

    assert len(answers) == 3
    turns = [(a["choices"][0]["prompt_token_ids"], a["choices"][0]["token_ids"]) for a in answers]
    lps = [a["choices"][0]["logprobs"]["token_logprobs"] for a in answers]
    # each turn's prompt, as vLLM echoed it, is the previous turn's prompt + completion + new turn
    for (p0, o0), (p1, _) in itertools.pairwise(turns):
        assert p1[: len(p0) + len(o0)] == p0 + o0
        new_turn = tok.decode(p1[len(p0) + len(o0) :])
        assert new_turn.endswith("<|im_start|>assistant\n<think>\n")
    # the node is exactly vLLM's ids; the generated ones (and only they) are trained
    prompt, out = turns[-1]
    assert node.tokens == prompt + out
    starts = [len(p) for p, _ in turns]
    generated = [i for (p, o) in turns for i in range(len(p), len(p) + len(o))]
    assert _trained(node) == generated
    assert [node.masked_tokens[i] for i in generated] == [node.tokens[i] for i in generated]
    # logprobs are vLLM's on generated tokens, the placeholder on the rest
    for start, (_, o), lp in zip(starts, turns, lps, strict=True):
        assert node.logprobs[start : start + len(o)] == pytest.approx(lp)
    assert all(node.logprobs[i] == 1.0 for i in set(range(len(node.tokens))) - set(generated))
    # the tool result and the user turn are masked, and the template's drift was counted
    text = tok.decode(node.tokens)
    assert '{"sum": 5}' in text and "And 4+4?" in text
    assert dict(stats.drifts).get("template") == 2

    # the old behaviour (split): three nodes; the last one trains only its own turn
    nodes, stats, answers = asyncio.run(_episode(url, str(tiny_model_dir), tok, "split"))
    assert len(nodes) == 3 and dict(stats.drifts).get("template") == 2
    last = answers[-1]["choices"][0]
    assert [nodes[-1].tokens[i] for i in _trained(nodes[-1])] == last["token_ids"]
