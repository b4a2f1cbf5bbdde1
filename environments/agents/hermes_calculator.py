"""The calculator task with hermes-agent (Nous Research's agent): its ``AIAgent`` with the calculator
registered as a tool of its own toolset, memory and context files off, ``HERMES_HOME`` in a temporary
folder; its final response is the answer. hermes-agent streams every request
(``stream_options.include_usage``). Runs in the ``hermes-agent`` framework's Python
(``scripts/setup_agents.sh hermes-agent``); see ``agent_io`` for its arguments."""

from __future__ import annotations

import os
import tempfile

os.environ.setdefault("HERMES_HOME", tempfile.mkdtemp(prefix="hermes-home-"))

from agent_io import CALCULATOR_SCHEMA, SYSTEM_PROMPT, Task, calculator, main  # noqa: E402
from run_agent import AIAgent  # noqa: E402
from tools.registry import registry  # noqa: E402

MAX_ITERATIONS = 8

registry.register(
    name="calculator",
    toolset="calculator",
    schema=CALCULATOR_SCHEMA["function"],
    handler=lambda args, **_: calculator(str(args.get("expression", ""))),
)


def solve(task: Task) -> str:
    agent = AIAgent(
        base_url=task.base_url,
        api_key=task.api_key,
        model=task.model,
        enabled_toolsets=["calculator"],
        ephemeral_system_prompt=SYSTEM_PROMPT,
        quiet_mode=True,
        skip_memory=True,
        skip_context_files=True,
        max_iterations=MAX_ITERATIONS,
        tool_delay=0,
        max_tokens=task.max_tokens,
    )
    return str(agent.run_conversation(task.question)["final_response"] or "")


if __name__ == "__main__":
    main(solve, __doc__ or "")
