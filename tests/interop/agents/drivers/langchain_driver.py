"""Conformance checks of langchain-openai (``ChatOpenAI`` in LangGraph's ReAct agent, plain and
streaming; ``max_tokens``, which it sends as ``max_completion_tokens``, honoured) against proxy
sessions; run in the ``langchain-openai`` framework's Python."""

from __future__ import annotations

from typing import Any

from driver_io import load_config, run_checks, task

config = load_config()

from langchain_calculator import solve  # noqa: E402
from langchain_openai import ChatOpenAI  # noqa: E402

QUESTION = "What is 6 * 7? [script:calc]"


def budget(config: dict[str, Any], url: str) -> dict[str, Any]:
    llm = ChatOpenAI(
        model=config["model"], base_url=url, api_key=config["api_key"], max_tokens=4, max_retries=0
    )
    out = llm.invoke("hi [script:plain]")
    return {
        "content": out.content,
        "finish_reason": out.response_metadata.get("finish_reason"),
        "output_tokens": (out.usage_metadata or {}).get("output_tokens"),
    }


def vllm_plain(config: dict[str, Any], url: str) -> dict[str, Any]:
    out = {}
    for stream in (False, True):
        llm = ChatOpenAI(
            model=config["model"],
            base_url=url,
            api_key=config["api_key"],
            max_tokens=16,
            max_retries=0,
            streaming=stream,
            stream_usage=stream,
        )
        reply = llm.invoke("hello")
        out["stream" if stream else "invoke"] = (reply.usage_metadata or {}).get("output_tokens")
    return out


if __name__ == "__main__":
    run_checks(
        config,
        {
            "invoke": lambda c, u: {"answer": solve(task(c, u, QUESTION))},
            "stream": lambda c, u: {"answer": solve(task(c, u, QUESTION), stream=True)},
            "budget": budget,
            "vllm_plain": vllm_plain,
        },
    )
