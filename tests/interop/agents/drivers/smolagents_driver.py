"""Conformance checks of smolagents' ``ToolCallingAgent`` (plain and ``stream_outputs``) against proxy
sessions; run in the ``smolagents`` framework's Python."""

from __future__ import annotations

from typing import Any

from driver_io import load_config, run_checks, task

config = load_config()

from smolagents_calculator import agent_for  # noqa: E402

QUESTION = "What is 6 * 7? [script:smol]"


def _run(config: dict[str, Any], url: str, stream: bool) -> dict[str, Any]:
    agent = agent_for(task(config, url, QUESTION), stream)
    answer = agent.run(QUESTION)
    usage = agent.monitor.get_total_token_counts()
    return {
        "answer": str(answer),
        "steps": len(agent.memory.steps),
        "output_tokens": getattr(usage, "output_tokens", None),
    }


if __name__ == "__main__":
    run_checks(
        config,
        {"run": lambda c, u: _run(c, u, False), "stream": lambda c, u: _run(c, u, True)},
    )
