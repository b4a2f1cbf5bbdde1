"""The OpenEnv env uses a server's MCP tools: against a real openenv server with one FastMCP tool
(``openenv_mcp_server.py``, openenv's own ``MCPEnvironment``, in openenv's venv), with scripted replies.

The tools are listed at reset and rendered into the first prompt (a Hermes template); the reply's
``<tool_call>`` runs on the server and its result comes back as a masked tool turn; bad calls (an
unknown tool, bad arguments, unparsable JSON, a tool that fails) become error turns, the episode goes
on, and each kind is counted and logged once.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import time
from pathlib import Path
from typing import Any

import pytest

from atroposlib.interop.openenv import OpenEnvEnv
from atroposlib.interop.openenv.client import KINDS
from atroposlib.interop.openenv.tools import TOOL_ERRORS
from atroposlib.runtime.config_loader import load_config
from atroposlib.testing.fake_server import FakeOpenAIServer
from atroposlib.testing.taught_model import HERMES_TOOLS_TEMPLATE
from atroposlib.testing.tiny_tokenizer import tiny_tokenizer_dir
from atroposlib.type_definitions import MASK_IGNORE
from atroposlib.utils.net import free_port

from .conftest import HERE, HostileServer, Proc


def _call(name: str, arguments: Any) -> str:
    return f"<tool_call>{json.dumps({'name': name, 'arguments': arguments})}</tool_call>"


# per seed: the first reply (tool calls), then the answer once a tool response is in the prompt
SCRIPT = {
    1: (_call("lookup", {"key": "k1"}), "code-k1"),  # the tool's answer, then the right code
    2: (_call("nope", {}), "no idea"),  # a tool the server does not offer
    3: (_call("lookup", {"k": 1}), "no idea"),  # bad arguments: the server says so
    4: ("<tool_call>{oops</tool_call>", "no idea"),  # not JSON
    5: (_call("lookup", {"key": "k5"}) + _call("lookup", {"key": "zz"}), "code-k5"),  # 2nd fails
    6: ("code-k6", "unused"),  # no tool call: the reply is the answer
}
PROMPTS: list[str] = []


def reply(prompt: str, body: dict[str, Any]) -> str:
    PROMPTS.append(prompt)
    seed = int(re.findall(r"Seed (\d+):", prompt)[-1])
    first, answer = SCRIPT[seed]
    return answer if "<tool_response>" in prompt else first


@pytest.fixture(scope="module")
def hermes_tokenizer(tmp_path_factory) -> Path:
    """The tiny tokenizer with a chat template that lists tools and renders tool turns (Hermes)."""
    from transformers import AutoTokenizer

    out = tmp_path_factory.mktemp("hermes-tok")
    tok = AutoTokenizer.from_pretrained(str(tiny_tokenizer_dir()))
    tok.chat_template = HERMES_TOOLS_TEMPLATE
    tok.save_pretrained(str(out))
    config = json.loads((out / "tokenizer_config.json").read_text())
    config["tokenizer_class"] = "PreTrainedTokenizerFast"
    (out / "tokenizer_config.json").write_text(json.dumps(config))
    return out


@pytest.fixture(scope="module")
def vault(openenv_python, tmp_path_factory):
    port = free_port()
    log = tmp_path_factory.mktemp("vault") / "vault.log"
    proc = Proc(
        [openenv_python, str(HERE / "openenv_mcp_server.py"), str(port), "2"], port, "/health", log
    )
    try:
        yield proc.wait()
    finally:
        proc.stop()


def _env(
    url: str, fake: FakeOpenAIServer, tok: Path, *extra: str, timeout: str = "20"
) -> OpenEnvEnv:
    loaded = load_config(
        OpenEnvEnv,
        "process",
        [
            "--openenv.url",
            url,
            "--env.tokenizer_name",
            str(tok),
            "--openai.base_url",
            fake.base_url,
            "--openai.model_name",
            "m",
            "--env.group_size",
            "2",
            "--openenv.max_sessions",
            "2",
            "--openenv.message_timeout",
            timeout,
            "--env.include_messages",
            "true",
            "--env.data_path_to_save_groups",
            "none",
            *extra,
        ],
    )
    return OpenEnvEnv(loaded.env, loaded.servers)


async def _items(env: OpenEnvEnv, seeds: list[int]) -> dict[int, Any]:
    try:
        await env.setup()
        return {seed: (await env.collect_trajectories({"seed": seed}))[0] for seed in seeds}
    finally:
        await env.server.close()


def test_mcp_tools_are_offered_called_and_fed_back(vault, hermes_tokenizer, caplog):
    caplog.set_level(logging.WARNING, logger="atroposlib.interop.openenv.env")
    with FakeOpenAIServer(tokenizer=hermes_tokenizer, responder=reply, model="m") as fake:
        env = _env(vault.url, fake, hermes_tokenizer)
        groups = asyncio.run(_items(env, list(SCRIPT)))
    tok = env.tokenizer
    first_prompts = [p for p in PROMPTS if "<tool_response>" not in p]
    assert first_prompts and all('"name": "lookup"' in p for p in first_prompts)  # tools listed
    scores = {seed: g.model_dump()["scores"] for seed, g in groups.items()}
    assert scores == {
        1: [1.0, 1.0],
        2: [0.0, 0.0],
        3: [0.0, 0.0],
        4: [0.0, 0.0],
        5: [1.0, 1.0],
        6: [1.0, 1.0],
    }

    def tool_turns(seed: int) -> list[str]:
        messages = groups[seed].model_dump()["messages"][0]
        return [m["content"] for m in messages if m["role"] == "tool"]

    assert tool_turns(1) == ["code-k1"]  # the server's tool answered
    assert tool_turns(2) == ["error: no tool 'nope' (tools: lookup)"]
    (bad_args,) = tool_turns(3)
    assert bad_args.startswith("error: lookup: ") and "Missing required argument" in bad_args
    (bad_json,) = tool_turns(4)
    assert bad_json.startswith("error: bad tool call (invalid JSON")
    (two,) = tool_turns(5)  # both calls' results in one tool turn
    assert two.startswith("code-k5\nerror: lookup: ") and "no such key: zz" in two
    assert tool_turns(6) == []
    # the tool turn is masked: only the model's own replies are trained on
    g1 = groups[1].model_dump()
    trained = tok.decode(
        [t for t, m in zip(g1["tokens"][0], g1["masks"][0], strict=True) if m != MASK_IGNORE]
    )
    assert trained.replace("<|im_end|>", "") == SCRIPT[1][0] + SCRIPT[1][1]
    full = tok.decode(g1["tokens"][0])
    assert "<tool_response>\ncode-k1\n</tool_response>" in full
    gauges = env.context.metrics.gauges
    assert {k: v for k, v in gauges.items() if k.startswith("openenv/tool_errors_")} == {
        "openenv/tool_errors_unknown_tool": 2,
        "openenv/tool_errors_tool_error": 4,
        "openenv/tool_errors_bad_call": 2,
    }
    lines = [r.getMessage() for r in caplog.records if "bad tool call" in r.getMessage()]
    assert len(lines) == 3 and all(any(w in x for x in lines) for w in TOOL_ERRORS.values())
    assert env.context.drop_counts == {}


def test_with_tools_off_a_tool_call_is_just_the_answer(vault, hermes_tokenizer):
    with FakeOpenAIServer(tokenizer=hermes_tokenizer, responder=reply, model="m") as fake:
        env = _env(vault.url, fake, hermes_tokenizer, "--openenv.tools", "false")
        groups = asyncio.run(_items(env, [1]))
    g = groups[1].model_dump()
    # no tools offered: the tool call text is the answer, and the episode ends with reward 0
    assert g["scores"] == [0.0, 0.0]
    assert [m["role"] for m in g["messages"][0]] == ["user", "assistant", "grader"]


def test_a_tool_call_the_server_never_answers_drops_the_episode_in_time(hermes_tokenizer, caplog):
    caplog.set_level(logging.WARNING, logger="atroposlib.interop.openenv.env")

    def call(prompt: str, body: dict[str, Any]) -> str:
        return _call("lookup", {"key": "k1"})

    with FakeOpenAIServer(tokenizer=hermes_tokenizer, responder=call, model="m") as fake:
        with HostileServer("tool_silent") as srv:
            env = _env(srv.url, fake, hermes_tokenizer, timeout="1")
            start = time.monotonic()
            groups = asyncio.run(_items(env, [1]))
            took = time.monotonic() - start
    assert groups[1] is None and took < 15
    assert dict(env.context.drop_counts) == {f"openenv episode: server {KINDS['timeout']}": 2}
    lines = [r.getMessage() for r in caplog.records if "dropped an OpenEnv episode" in r.message]
    assert len(lines) == 1 and "no answer to tools/call in 1s" in lines[0], lines
