"""Atropos's utility names with real behaviour: tool-call parsing, best-of-n, advantages,
history truncation, HTTP response parsing (against a real loopback server)."""

from __future__ import annotations

import aiohttp
import httpx
import numpy as np
import pytest
from transformers import AutoTokenizer

from atroposlib.testing import FakeOpenAIServer, tiny_tokenizer_dir
from atroposlib.utils.advantages import (
    allclose_to_first,
    compute_discounted_returns,
    compute_grpo_process_supervision_advantages,
    compute_stats,
)
from atroposlib.utils.best_of_n_selection import select_best_index
from atroposlib.utils.io import parse_http_response
from atroposlib.utils.message_history_utils import (
    ensure_trajectory_token_limit,
    strip_thinking,
    truncate_thinking,
)
from atroposlib.utils.tokenize_for_trainer import tokenize_for_trainer
from atroposlib.utils.tool_call_parser import parse_tool_call
from tests.compat.helpers import run_coro

TOOLS = [{"name": "calc"}, {"type": "function", "function": {"name": "search"}}]


@pytest.fixture(scope="module")
def tok():
    return AutoTokenizer.from_pretrained(str(tiny_tokenizer_dir()))


@pytest.mark.parametrize(
    "text, expected",
    [
        (
            '<tool_call>{"name": "calc", "arguments": {"x": 1}}</tool_call>',
            ("calc", {"x": 1}, False),
        ),
        ("pre <tool_call>{'name': 'search', 'arguments': {}}</tool_call>", ("search", {}, False)),
        (
            '<tool_call>{"name": "rm", "arguments": {"p": "/"}}</tool_call>',
            ("-ERROR-", {"p": "/"}, True),
        ),
        ("<tool_call>not json</tool_call>", ("-ERROR-", {}, True)),
        ("no call here", ("-ERROR-", {}, True)),
        ('<tool_call>["calc"]</tool_call>', ("-ERROR-", {}, True)),
    ],
)
def test_parse_tool_call(text, expected):
    assert parse_tool_call(text, TOOLS) == expected


def test_parse_tool_call_other_tags_and_no_tool_list():
    text = '<call>{"name": "anything", "arguments": {"a": 2}}</call>'
    assert parse_tool_call(text, None, ["tool_call", "call"]) == ("anything", {"a": 2}, False)


def test_select_best_index():
    assert select_best_index([0.5, 1.0, 1.0], [10, 30, 20]) == 2  # tie on reward: shorter wins
    assert select_best_index([0.5, 1.0, 1.0], [10, 30, 20], secondary_lower_is_better=False) == 1
    assert select_best_index([3, 1, 2], [0, 0, 0], primary_higher_is_better=False) == 1
    assert select_best_index([1, 1], [5, 5]) == 0
    with pytest.raises(ValueError):
        select_best_index([], [])
    with pytest.raises(ValueError):
        select_best_index([1], [1, 2])


def test_advantages():
    assert allclose_to_first([[1.0, 2.0], [1.0, 2.0 + 1e-9]])
    assert list(allclose_to_first([[1, 2], [1, 3], [1, 2]], return_vector=True)) == [
        True,
        False,
        True,
    ]
    stats = compute_stats([1, [2, [3, 4]]])
    assert stats["mean"] == pytest.approx(2.5) and stats["var"] == pytest.approx(1.25)
    with pytest.raises(ValueError):
        compute_stats([])
    with pytest.raises(ValueError):
        compute_stats([1, "2"])
    assert np.allclose(compute_discounted_returns([1.0, 0.0, 1.0], 0.5), [1.25, 0.5, 1.0])
    rewards = [[1.0, 0.0], [0.0]]
    adv = compute_grpo_process_supervision_advantages(rewards)
    mean, std = 1 / 3, (2 / 9) ** 0.5
    assert np.allclose(adv[0], [(1 - mean) / std + (0 - mean) / std, (0 - mean) / std])
    assert np.allclose(adv[1], [(0 - mean) / std])
    disc = compute_grpo_process_supervision_advantages(rewards, gamma=0.0)
    assert np.allclose(disc[0], [(1 - mean) / std, (0 - mean) / std])
    with pytest.raises(ValueError):
        compute_grpo_process_supervision_advantages([[1.0], [1.0]])


def test_strip_and_truncate_thinking(tok):
    assert strip_thinking("<think>abc</think>answer") == "answer"
    assert strip_thinking("no block") == "no block"
    long = "<think>first paragraph here\n\nsecond one is the end</think> 42"
    out = truncate_thinking(long, tok, 1000)
    assert out == "<think>\nfirst paragraph here\n\nsecond one is the end\n</think> 42"
    last_para = len(tok.encode("second one is the end", add_special_tokens=False))
    out = truncate_thinking(long, tok, last_para)
    assert out == "<think>\n... second one is the end\n</think> 42"
    out = truncate_thinking("<think>" + "word " * 50 + "</think> 7", tok, 3)
    inner = out[len("<think>\n... ") : out.index("\n</think>")]
    assert len(tok.encode(inner, add_special_tokens=False)) <= 4 and out.endswith("</think> 7")
    assert truncate_thinking("<think>   </think> x", tok, 5) == "<think></think> x"
    assert truncate_thinking("</think> odd <think>", tok, 5) == "</think> odd <think>"


def test_ensure_trajectory_token_limit(tok):
    def step(turns: int) -> dict:
        chat = [{"role": "system", "content": "sys"}]
        for i in range(turns):
            chat += [
                {"role": "user", "content": f"obs {i} " * 5},
                {"role": "assistant", "content": f"act {i}"},
            ]
        t = tokenize_for_trainer(tok, chat)
        return {
            "messages": [chat, chat],
            "tokens": [t["tokens"]] * 2,
            "masks": [t["masks"]] * 2,
            "scores": [1.0, 0.0],
        }

    short, long = step(1), step(6)
    limit = len(step(2)["tokens"][0])
    out = ensure_trajectory_token_limit([short, long, {"tokens": []}], tok, limit)
    assert len(out) == 2 and out[0] is short
    fitted = out[1]
    assert all(len(t) <= limit for t in fitted["tokens"])
    conv = fitted["messages"][0]
    assert conv[0]["content"] == "sys" and conv[-1]["content"] == "act 5"  # protected ends
    assert conv[-2]["content"].startswith("obs 5")
    assert fitted["tokens"][0] == tokenize_for_trainer(tok, conv)["tokens"]
    # a step whose protected minimum is already over the limit is dropped
    assert ensure_trajectory_token_limit([long], tok, 5) == []


def test_parse_http_response_with_aiohttp_and_httpx():
    async def go(base: str):
        async with aiohttp.ClientSession() as s:
            async with s.get(base + "/models") as resp:
                ok = await parse_http_response(resp)
            async with s.get(base + "/nope") as resp:
                with pytest.raises(aiohttp.ClientResponseError):
                    await parse_http_response(resp)
        async with httpx.AsyncClient() as c:
            ok2 = await parse_http_response(await c.get(base + "/models"))
            with pytest.raises(httpx.HTTPStatusError):
                await parse_http_response(await c.get(base + "/nope"))
        return ok, ok2

    with FakeOpenAIServer() as fake:
        ok, ok2 = run_coro(go(fake.base_url))
    assert ok == ok2 and ok["data"][0]["id"] == "fake-model"
