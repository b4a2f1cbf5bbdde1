"""An OpenEnv server's MCP tools, offered to the model and run on the server.

At reset the episode asks the session for the server's tools (``tools/list`` in an ``mcp`` frame);
a server without MCP answers with an error and the episode has no tools. The tools go to the chat
template as OpenAI function specs (``tools=``), so a Hermes/Qwen template lists them in the system
turn. Every ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>`` of a reply is then run with
``tools/call`` on the same session, and the results go back to the model as one tool turn. A bad call
never ends the episode: its tool turn says what was wrong, and it is counted under one of
``TOOL_ERRORS``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Optional

from atroposlib.interop.openenv.client import OpenEnvSession
from atroposlib.utils.tool_call_parser import hermes_blocks

TOOL_ERRORS = {
    "bad_call": "a <tool_call> that is not a JSON object with a name and object arguments",
    "unknown_tool": "a call of a tool the server does not offer",
    "tool_error": "a call the server answered with an error (bad arguments, the tool failed)",
}
"""The kinds of bad tool call, with the words of the env's one log line per kind."""

MAX_ERROR_CHARS = 1000  # a server's error message shown to the model is cut here


@dataclass
class ServerTools:
    """The tools a server offers: the specs for the chat template and their names."""

    specs: list[dict[str, Any]]

    @property
    def names(self) -> set[str]:
        return {spec["function"]["name"] for spec in self.specs}


@dataclass
class ToolOutcome:
    """One call's result text for the model, and its error kind (``TOOL_ERRORS``) if it failed."""

    text: str
    error: Optional[str] = None


def _spec(tool: Any) -> Optional[dict[str, Any]]:
    if not isinstance(tool, dict) or not isinstance(tool.get("name"), str):
        return None
    schema = tool.get("inputSchema") or tool.get("input_schema") or {}
    if not isinstance(schema, dict) or not schema:
        schema = {"type": "object", "properties": {}}
    return {
        "type": "function",
        "function": {
            "name": tool["name"],
            "description": str(tool.get("description") or ""),
            "parameters": schema,
        },
    }


async def list_tools(session: OpenEnvSession) -> Optional[ServerTools]:
    """The server's tools, or None when it offers none (no MCP, or an empty list)."""
    answer = await session.mcp("tools/list", {})
    tools = answer.get("tools") if "error" not in answer else None
    specs = [s for s in map(_spec, tools if isinstance(tools, list) else []) if s is not None]
    return ServerTools(specs) if specs else None


def result_text(result: dict[str, Any]) -> str:
    """What the model reads of a ``tools/call`` result: its data, else its text content, else JSON."""
    data = result.get("data", result.get("value"))
    if data is not None:
        return data if isinstance(data, str) else json.dumps(data, default=str)
    content = result.get("content")
    if isinstance(content, list):
        texts = [c.get("text") for c in content if isinstance(c, dict)]
        if any(isinstance(t, str) for t in texts):
            return "\n".join(t for t in texts if isinstance(t, str))
    return json.dumps(result, default=str)


async def run_tool_calls(
    session: OpenEnvSession, tools: ServerTools, reply: str
) -> Optional[list[ToolOutcome]]:
    """Run every tool call of ``reply`` on the server, in order; None when the reply has none."""
    blocks = hermes_blocks(reply)
    if not blocks:
        return None
    outcomes = []
    for block in blocks:
        name, args = block.name, block.arguments
        if isinstance(args, str):
            try:
                args = json.loads(args)
            except ValueError:
                args = None
        if block.error is not None or not name or not isinstance(args, dict):
            why = block.error or "it needs a string name and object arguments"
            outcomes.append(ToolOutcome(f"error: bad tool call ({why})", "bad_call"))
        elif name not in tools.names:
            offered = ", ".join(sorted(tools.names))
            outcomes.append(
                ToolOutcome(f"error: no tool {name!r} (tools: {offered})", "unknown_tool")
            )
        else:
            answer = await session.mcp("tools/call", {"name": name, "arguments": args})
            if "error" in answer:
                message = str(answer["error"].get("message", "no message"))[:MAX_ERROR_CHARS]
                outcomes.append(ToolOutcome(f"error: {name}: {message}", "tool_error"))
            else:
                outcomes.append(ToolOutcome(result_text(answer)))
    return outcomes


__all__ = [
    "TOOL_ERRORS",
    "ServerTools",
    "ToolOutcome",
    "list_tools",
    "result_text",
    "run_tool_calls",
]
