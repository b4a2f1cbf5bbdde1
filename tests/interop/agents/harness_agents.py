"""Agent programs the harness tests run as callables (``--agent.program
tests.interop.agents.harness_agents:NAME``), written as a user would: the ``openai`` client at the
session URL it is given. ``tool_loop`` plays the calculator task; ``crashes`` raises after one reply;
``sleeps`` outlives its time limit; ``keeps_asking`` ignores every answer until the proxy refuses it;
``replays_as_text`` plays the task but sends its tool calls back as text, as smolagents does (each turn
then starts a new node)."""

from __future__ import annotations

import asyncio
import json

import openai

from atroposlib.interop.agents.program import AgentCall

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "calculator",
            "parameters": {"type": "object", "properties": {"expression": {"type": "string"}}},
        },
    }
]


def _client(call: AgentCall) -> openai.OpenAI:
    return openai.OpenAI(base_url=call.base_url, api_key=call.api_key, max_retries=0)


def _ask(call: AgentCall, messages: list[dict]) -> openai.types.chat.ChatCompletion:
    kw = {} if call.temperature is None else {"temperature": call.temperature}
    return _client(call).chat.completions.create(
        model=call.model, messages=messages, tools=TOOLS, max_tokens=call.max_tokens, **kw
    )


def tool_loop(call: AgentCall) -> str:
    messages: list[dict] = [{"role": "user", "content": call.task}]
    for _ in range(6):
        message = _ask(call, messages).choices[0].message
        messages.append(
            message.model_dump(exclude_none=True, include={"role", "content", "tool_calls"})
        )
        if not message.tool_calls:
            return message.content or ""
        for tc in message.tool_calls:
            a, _, b = json.loads(tc.function.arguments)["expression"].partition(" * ")
            result = json.dumps({"result": int(a) * int(b)})
            messages.append({"role": "tool", "tool_call_id": tc.id, "content": result})
    return ""


def crashes(call: AgentCall) -> str:
    _ask(call, [{"role": "user", "content": call.task}])
    raise RuntimeError("the agent's own bug")


async def sleeps(call: AgentCall) -> str:
    await asyncio.sleep(60)
    return "never"


def keeps_asking(call: AgentCall) -> str:
    messages: list[dict] = [{"role": "user", "content": call.task}]
    while True:
        _ask(call, messages)
        messages.append({"role": "user", "content": "and again"})


def replays_as_text(call: AgentCall) -> str:
    messages: list[dict] = [{"role": "user", "content": call.task}]
    for _ in range(6):
        message = _ask(call, messages).choices[0].message
        if not message.tool_calls:
            return message.content or ""
        expression = json.loads(message.tool_calls[0].function.arguments)["expression"]
        a, _, b = expression.partition(" * ")
        messages.append(
            {"role": "assistant", "content": f"Calling tools: calculator({expression})"}
        )
        messages.append({"role": "user", "content": f"Observation: {int(a) * int(b)}"})
    return ""
