"""Conformance checks of the OpenAI Agents SDK (``Runner.run`` and ``Runner.run_streamed`` on the
chat-completions model) against proxy sessions; run in the ``openai-agents`` framework's Python."""

from __future__ import annotations

import asyncio
from typing import Any

from driver_io import load_config, run_checks, task

config = load_config()

from agents import ModelSettings, Runner, set_tracing_disabled  # noqa: E402
from openai_agents_calculator import agent_for, solve  # noqa: E402

QUESTION = "What is 6 * 7? [script:calc]"


def run(config: dict[str, Any], url: str) -> dict[str, Any]:
    set_tracing_disabled(True)
    result = asyncio.run(Runner.run(agent_for(task(config, url, QUESTION)), QUESTION, max_turns=4))
    usage = result.context_wrapper.usage
    return {
        "answer": str(result.final_output),
        "requests": usage.requests,
        "input_tokens": usage.input_tokens,
        "output_tokens": usage.output_tokens,
    }


def streamed(config: dict[str, Any], url: str) -> dict[str, Any]:
    async def go() -> dict[str, Any]:
        set_tracing_disabled(True)
        agent = agent_for(task(config, url, QUESTION))
        agent.model_settings = ModelSettings(max_tokens=400, include_usage=True)
        result = Runner.run_streamed(agent, QUESTION, max_turns=4)
        events = [e async for e in result.stream_events()]
        usage = result.context_wrapper.usage
        return {
            "answer": str(result.final_output),
            "events": len(events),
            "output_tokens": usage.output_tokens,
        }

    return asyncio.run(go())


def example(config: dict[str, Any], url: str) -> dict[str, Any]:
    return {"answer": solve(task(config, url, QUESTION))}


if __name__ == "__main__":
    run_checks(config, {"run": run, "streamed": streamed, "example": example})
