"""The calculator task with the plain ``openai`` client: a tool loop (call, run the tool, send its
result back) until a reply calls nothing; that reply is the answer. Runs in the ``openai`` framework's
Python (``scripts/setup_agents.sh openai``); see ``agent_io`` for its arguments."""

from __future__ import annotations

import json

from agent_io import CALCULATOR_SCHEMA, SYSTEM_PROMPT, Task, calculator, main
from openai import OpenAI

MAX_TURNS = 8


def solve(task: Task) -> str:
    client = OpenAI(base_url=task.base_url, api_key=task.api_key, max_retries=0)
    messages: list[dict] = [
        {"role": "system", "content": SYSTEM_PROMPT},
        {"role": "user", "content": task.question},
    ]
    for _ in range(MAX_TURNS):
        reply = client.chat.completions.create(
            model=task.model,
            messages=messages,
            tools=[CALCULATOR_SCHEMA],
            max_tokens=task.max_tokens,
        )
        message = reply.choices[0].message
        messages.append(
            message.model_dump(exclude_none=True, include={"role", "content", "tool_calls"})
        )
        if not message.tool_calls:
            return message.content or ""
        for call in message.tool_calls:
            expression = json.loads(call.function.arguments).get("expression", "")
            result = calculator(str(expression))
            messages.append({"role": "tool", "tool_call_id": call.id, "content": result})
    return ""


if __name__ == "__main__":
    main(solve, __doc__ or "")
