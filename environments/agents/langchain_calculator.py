"""The calculator task with LangChain: ``ChatOpenAI`` at the session URL in LangGraph's prebuilt ReAct
agent with one tool; the last message is the answer. ``--stream`` streams the model's replies
(``streaming=True``). Runs in the ``langchain-openai`` framework's Python
(``scripts/setup_agents.sh langchain-openai``); see ``agent_io`` for its arguments."""

from __future__ import annotations

import warnings

from agent_io import SYSTEM_PROMPT, Task, main
from agent_io import calculator as evaluate
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI
from langgraph.prebuilt import create_react_agent

RECURSION_LIMIT = 12


@tool
def calculator(expression: str) -> str:
    """Evaluate an arithmetic expression with + - * /."""
    return evaluate(expression)


def solve(task: Task, stream: bool = False) -> str:
    llm = ChatOpenAI(
        model=task.model,
        base_url=task.base_url,
        api_key=task.api_key,
        max_tokens=task.max_tokens,
        max_retries=0,
        streaming=stream,
        stream_usage=stream,
    )
    with warnings.catch_warnings():  # its new home (langchain.agents) is another package
        warnings.simplefilter("ignore")
        agent = create_react_agent(llm, [calculator], prompt=SYSTEM_PROMPT)
    out = agent.invoke(
        {"messages": [("user", task.question)]}, {"recursion_limit": RECURSION_LIMIT}
    )
    return str(out["messages"][-1].content)


if __name__ == "__main__":
    main(solve, __doc__ or "")
