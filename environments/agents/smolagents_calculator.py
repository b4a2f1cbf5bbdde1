"""The calculator task with smolagents: a ``ToolCallingAgent`` with one tool on an
``OpenAIServerModel``; the agent ends with its ``final_answer`` tool. smolagents replays earlier turns
as text ("Calling tools: ..."), not as the tool calls the model wrote, so each turn starts a new node
on the proxy (counted as a history edit; docs/interop.md). Runs in the ``smolagents`` framework's
Python (``scripts/setup_agents.sh smolagents``); see ``agent_io`` for its arguments."""

from __future__ import annotations

from agent_io import Task, main
from agent_io import calculator as evaluate
from smolagents import OpenAIServerModel, ToolCallingAgent, tool

MAX_STEPS = 4


@tool
def calculator(expression: str) -> str:
    """Evaluate an arithmetic expression with + - * /.

    Args:
        expression: the expression, e.g. 347 * 28
    """
    return evaluate(expression)


def agent_for(task: Task, stream: bool = False) -> ToolCallingAgent:
    model = OpenAIServerModel(
        model_id=task.model,
        api_base=task.base_url,
        api_key=task.api_key,
        max_tokens=task.max_tokens,
    )
    return ToolCallingAgent(
        tools=[calculator],
        model=model,
        max_steps=MAX_STEPS,
        verbosity_level=0,
        stream_outputs=stream,
    )


def solve(task: Task, stream: bool = False) -> str:
    return str(agent_for(task, stream).run(task.question))


if __name__ == "__main__":
    main(solve, __doc__ or "")
