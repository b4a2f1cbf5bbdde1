"""The calculator task with the OpenAI Agents SDK: an ``Agent`` with one function tool on the
chat-completions model, run by ``Runner``; its final output is the answer. Tracing is off (it would
export to OpenAI's servers). Runs in the ``openai-agents`` framework's Python
(``scripts/setup_agents.sh openai-agents``); see ``agent_io`` for its arguments."""

from __future__ import annotations

import asyncio

from agent_io import SYSTEM_PROMPT, Task, main
from agent_io import calculator as evaluate
from agents import (
    Agent,
    ModelBehaviorError,
    ModelSettings,
    OpenAIChatCompletionsModel,
    Runner,
    function_tool,
    set_tracing_disabled,
)
from openai import AsyncOpenAI

MAX_TURNS = 8


@function_tool
def calculator(expression: str) -> str:
    """Evaluate an arithmetic expression with + - * /."""
    return evaluate(expression)


def agent_for(task: Task) -> Agent:
    client = AsyncOpenAI(base_url=task.base_url, api_key=task.api_key, max_retries=0)
    return Agent(
        name="calculator",
        instructions=SYSTEM_PROMPT,
        tools=[calculator],
        model=OpenAIChatCompletionsModel(model=task.model, openai_client=client),
        model_settings=ModelSettings(max_tokens=task.max_tokens, temperature=task.temperature),
    )


async def solve_async(task: Task) -> str:
    set_tracing_disabled(True)
    try:
        result = await Runner.run(agent_for(task), task.question, max_turns=MAX_TURNS)
    except ModelBehaviorError:  # the model called a tool it does not have: no answer (reward 0)
        return ""
    return str(result.final_output)


def solve(task: Task) -> str:
    return asyncio.run(solve_async(task))


if __name__ == "__main__":
    main(solve, __doc__ or "")
