"""Conformance checks of litellm (tool loop, a stream with a tool call, string ``stop`` and text-part
contents) and of mini-swe-agent on it, against proxy sessions; run in the ``mini-swe-agent``
framework's Python (which carries litellm)."""

from __future__ import annotations

import os
from typing import Any

from driver_io import load_config, run_checks, task

config = load_config()
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("MSWEA_COST_TRACKING", "ignore_errors")

import litellm  # noqa: E402
from agent_io import CALCULATOR_SCHEMA  # noqa: E402


def _ask(config: dict[str, Any], url: str, messages: list[dict[str, Any]], **kw: Any) -> Any:
    return litellm.completion(
        model=f"openai/{config['model']}",
        api_base=url,
        api_key=config["api_key"],
        messages=messages,
        **kw,
    )


def tools(config: dict[str, Any], url: str) -> dict[str, Any]:
    from litellm_calculator import solve

    return {"answer": solve(task(config, url, "What is 6 * 7? [script:calc]"))}


def stream(config: dict[str, Any], url: str) -> dict[str, Any]:
    messages = [{"role": "user", "content": "What is 6 * 7? [script:calc]"}]
    chunks = list(
        _ask(
            config,
            url,
            messages,
            tools=[CALCULATOR_SCHEMA],
            stream=True,
            stream_options={"include_usage": True},
        )
    )
    built = litellm.stream_chunk_builder(chunks, messages=messages)
    calls = built.choices[0].message.tool_calls or []
    return {
        "chunks": len(chunks),
        "calls": [(c.function.name, c.function.arguments) for c in calls],
        "completion_tokens": built.usage.completion_tokens,
    }


def stop_and_parts(config: dict[str, Any], url: str) -> dict[str, Any]:
    messages = [{"role": "user", "content": [{"type": "text", "text": "hi [script:plain]"}]}]
    out = _ask(config, url, messages, stop="\n\n\n")
    return {
        "content": out.choices[0].message.content,
        "completion_tokens": out.usage.completion_tokens,
    }


def mini_swe_agent(config: dict[str, Any], url: str) -> dict[str, Any]:
    from mini_swe_agent_calculator import solve

    return {"answer": solve(task(config, url, "What is 6 * 7? [script:swe]"))}


def vllm_stream(config: dict[str, Any], url: str) -> dict[str, Any]:
    messages = [{"role": "user", "content": "hello"}]
    chunks = list(
        _ask(
            config,
            url,
            messages,
            max_tokens=16,
            stream=True,
            stream_options={"include_usage": True},
        )
    )
    built = litellm.stream_chunk_builder(chunks, messages=messages)
    return {"chunks": len(chunks), "completion_tokens": built.usage.completion_tokens}


if __name__ == "__main__":
    run_checks(
        config,
        {
            "tools": tools,
            "stream": stream,
            "stop_and_parts": stop_and_parts,
            "mini_swe_agent": mini_swe_agent,
            "vllm_stream": vllm_stream,
        },
    )
