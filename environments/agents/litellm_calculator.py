"""The calculator task with litellm: ``litellm.completion`` on the ``openai/<model>`` route at the
session URL, a tool loop until a reply calls nothing. Runs in the ``mini-swe-agent`` framework's
Python, which carries litellm (``scripts/setup_agents.sh mini-swe-agent``); see ``agent_io`` for its
arguments."""

from __future__ import annotations

import json
import os

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # offline: no cost map download

import litellm  # noqa: E402
from agent_io import CALCULATOR_SCHEMA, SYSTEM_PROMPT, Task, calculator, main  # noqa: E402

MAX_TURNS = 8


def solve(task: Task) -> str:
    messages: list[dict] = [
        {"role": "system", "content": SYSTEM_PROMPT},
        {"role": "user", "content": task.question},
    ]
    for _ in range(MAX_TURNS):
        reply = litellm.completion(
            model=f"openai/{task.model}",
            api_base=task.base_url,
            api_key=task.api_key,
            messages=messages,
            tools=[CALCULATOR_SCHEMA],
            max_tokens=task.max_tokens,
        )
        message = reply.choices[0].message
        calls = message.tool_calls or []
        messages.append(
            {
                "role": "assistant",
                "content": message.content,
                "tool_calls": [c.model_dump() for c in calls] or None,
            }
        )
        if not calls:
            return message.content or ""
        for call in calls:
            expression = json.loads(call.function.arguments).get("expression", "")
            messages.append(
                {"role": "tool", "tool_call_id": call.id, "content": calculator(str(expression))}
            )
    return ""


if __name__ == "__main__":
    main(solve, __doc__ or "")
