"""A Hermes tool call sampled from a real vLLM server through ``managed_server`` arrives in
``message.tool_calls`` (``tool_parser = "hermes"``), with exact tokens in the tracked node.

The tier's tiny model is taught the call (``atroposlib.testing.taught_model``; conftest's
``tiny_model_dir``), as in ``tests/compat/test_managed_tool_calls.py``, which runs the same episode
against our CPU engine. It is sampled from the LoRA server's base model, whose weights no test changes.
"""

from __future__ import annotations

import json

import pytest
from transformers import AutoTokenizer

from atroposlib.inference_clients.config import APIServerConfig
from atroposlib.inference_clients.server_manager import ServerManager
from tests.compat.helpers import run_coro
from tests.compat.test_managed_tool_calls import CALL, TOOLS, TURN1

pytestmark = pytest.mark.timeout(900)


def test_hermes_tool_call_from_vllm(dev_vllm, tiny_model_dir):
    tok = AutoTokenizer.from_pretrained(str(tiny_model_dir))
    config = APIServerConfig(
        base_url=dev_vllm["lora"].url + "/v1",
        model_name=str(tiny_model_dir),
        server_type="vllm",
        timeout=300,
    )

    async def ask():
        server = ServerManager([config])
        server.tool_parser = "hermes"
        async with server.managed_server(tokenizer=tok) as managed:
            out = await managed.chat_completion(
                messages=TURN1, tools=TOOLS, max_tokens=96, temperature=0.0
            )
            nodes = managed.get_state()["nodes"]
        await server.close()
        return out, nodes

    out, [node] = run_coro(ask())
    choice = out.choices[0]
    assert choice.finish_reason == "tool_calls", choice
    [call] = choice.message.tool_calls
    assert call["function"]["name"] == "get_weather"
    assert json.loads(call["function"]["arguments"]) == {"city": "Paris"}
    prompt = tok.apply_chat_template(TURN1, tools=TOOLS, tokenize=False, add_generation_prompt=True)
    prompt_ids = tok.encode(prompt, add_special_tokens=False)
    reply_ids = tok.encode(CALL, add_special_tokens=False) + [tok.eos_token_id]
    assert node.tokens == prompt_ids + reply_ids
    assert node.masked_tokens == [-100] * len(prompt_ids) + reply_ids
    assert len(node.logprobs) == len(node.tokens)
