"""The agent programs people use, unmodified, against a real proxy: the ``openai`` client (sync, async,
streaming), the OpenAI Agents SDK, smolagents, litellm and mini-swe-agent on it, langchain-openai in
LangGraph, and hermes-agent, each the real package in its own environment (``scripts/setup_agents.sh``)
driven as a subprocess (``drivers/``; one per framework, several checks each), over the fake model
scripted per task (tool calls a tiny random model cannot write; the real-vLLM paths are
``tests/real_vllm/test_proxy_agents.py``). Each episode must complete, and each session's nodes must
hold exactly the replies its client was sent, each trained once, everything else masked, with the
backend's own token ids (``proxy_harness.check_session``). smolagents replays earlier turns as text:
each turn is its own node, counted as a history edit."""

from __future__ import annotations

import pytest

from tests.inference_clients.proxy_harness import check_session
from tests.interop.agents.conformance import run_driver

pytestmark = pytest.mark.timeout(600)

ANSWER = "The answer is 42."


def _nodes_per_session(proxy, sessions, tok) -> dict[str, int]:
    return {check: len(check_session(proxy, s, tok)["nodes"]) for check, s in sessions.items()}


def test_openai_client(scripted_proxy, tok, tmp_path):
    checks = ["example", "plain", "n2", "stream", "parallel", "null_content", "async", "refusals"]
    report, sessions = run_driver(scripted_proxy, "openai", "openai_driver.py", checks, tmp_path)
    assert report["example"]["answer"] == ANSWER
    assert report["plain"]["content"] == "Hello there, friend."
    assert (
        report["plain"]["usage"]["completion_tokens"]
        > 0
        < report["plain"]["usage"]["prompt_tokens"]
    )
    assert report["n2"]["contents"] == ["The answer is 42.", "It is 42 ✓"]
    assert (
        report["stream"]["names"] == ["calculator"]
        and report["stream"]["usage"]["total_tokens"] > 0
    )
    assert report["parallel"] == {"calls": 2, "answer": "Both done: 42 and 4."}
    assert report["null_content"]["content"] == "Hello there, friend."
    assert (
        report["async"]["content"] == "".join(report["async"]["pieces"]) == "Hello there, friend."
    )
    assert len(report["async"]["pieces"]) > 3
    refused = report["refusals"]
    assert refused["field"]["status"] == 400 and refused["field"]["class"] == "BadRequestError"
    assert "foo: not a field the proxy serves" in refused["field"]["message"]
    assert refused["model"]["status"] == 404 and refused["model"]["class"] == "NotFoundError"
    assert refused["session"]["status"] == 404 and "not found" in refused["session"]["message"]
    del sessions["refusals"]
    assert set(_nodes_per_session(scripted_proxy, sessions, tok).values()) == {1, 2}  # n=2: two


def test_openai_agents_sdk(scripted_proxy, tok, tmp_path):
    report, sessions = run_driver(
        scripted_proxy,
        "openai-agents",
        "openai_agents_driver.py",
        ["run", "streamed", "example"],
        tmp_path,
    )
    assert report["run"]["answer"] == ANSWER and report["run"]["requests"] == 2
    assert (
        report["run"]["input_tokens"] > 0 and report["run"]["output_tokens"] > 0
    )  # usage is reported
    assert report["streamed"]["answer"] == ANSWER and report["streamed"]["events"] > 0
    assert report["streamed"]["output_tokens"] > 0
    assert report["example"]["answer"] == ANSWER
    # tool calls are replayed as the calls the model wrote: the episode is one node
    assert set(_nodes_per_session(scripted_proxy, sessions, tok).values()) == {1}


def test_smolagents(scripted_proxy, tok, tmp_path):
    edits = scripted_proxy.manager.managed_stats.history_edits
    report, sessions = run_driver(
        scripted_proxy, "smolagents", "smolagents_driver.py", ["run", "stream"], tmp_path
    )
    assert report["run"]["answer"] == report["stream"]["answer"] == "42"
    assert report["run"]["output_tokens"] > 0  # smolagents reads usage (it raised without it)
    # smolagents replays its calls as text ("Calling tools: ..."), not as the calls the model wrote:
    # each of the two turns is its own node (the second's prompt holds the first turn as text,
    # masked), and each replay is counted as a history edit
    assert _nodes_per_session(scripted_proxy, sessions, tok) == {"run": 2, "stream": 2}
    assert scripted_proxy.manager.managed_stats.history_edits == edits + 2


def test_litellm_and_mini_swe_agent(scripted_proxy, tok, tmp_path):
    checks = ["tools", "stream", "stop_and_parts", "mini_swe_agent"]
    report, sessions = run_driver(
        scripted_proxy, "mini-swe-agent", "litellm_driver.py", checks, tmp_path
    )
    assert report["tools"]["answer"] == ANSWER
    assert report["stream"]["calls"] == [["calculator", '{"expression": "6 * 7"}']]
    assert report["stream"]["completion_tokens"] > 0
    assert report["stop_and_parts"]["content"] == "Hello there, friend."
    assert report["stop_and_parts"]["completion_tokens"] > 0
    assert report["mini_swe_agent"]["answer"] == "42"
    assert set(_nodes_per_session(scripted_proxy, sessions, tok).values()) == {1}


def test_langchain_openai(scripted_proxy, tok, tmp_path):
    report, sessions = run_driver(
        scripted_proxy,
        "langchain-openai",
        "langchain_driver.py",
        ["invoke", "stream", "budget"],
        tmp_path,
    )
    assert report["invoke"]["answer"] == report["stream"]["answer"] == ANSWER
    # max_tokens=4 goes out as max_completion_tokens, and is honoured
    assert report["budget"]["output_tokens"] == 4 and report["budget"]["finish_reason"] == "length"
    assert set(_nodes_per_session(scripted_proxy, sessions, tok).values()) == {1}


def test_hermes_agent(scripted_proxy, tok, tmp_path):
    report, sessions = run_driver(
        scripted_proxy, "hermes-agent", "hermes_driver.py", ["run"], tmp_path
    )
    assert report["run"]["answer"] == ANSWER
    assert _nodes_per_session(scripted_proxy, sessions, tok) == {"run": 1}


def test_nothing_was_taken_back_or_failed(scripted_proxy):
    counts = scripted_proxy.state.summary_counts()
    assert counts["undelivered"] == 0 and counts["backend_errors"] == 0
