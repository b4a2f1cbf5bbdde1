"""Asking a served model one BFCL question, in either of the leaderboard's two modes.

* **Prompt** (the leaderboard's "Prompt" rows, and BFCL's only mode for a model without native tool
  calls): BFCL's own system prompt with the function docs, the question, a plain chat completion; the
  reply is Python call text (``[f(a=1)]``) that BFCL's decoder reads.
* **FC** (the leaderboard's "FC" rows): the functions go as OpenAI ``tools`` (BFCL's own conversion, with
  ``.`` in names as ``_``), the question alone, through the managed server with the Hermes tool parser;
  the calls are the parsed ``message.tool_calls``. A chat template that ignores ``tools=`` (SmolLM2's
  ChatML) gets the tools listed in a Hermes system prompt instead.

Both go through ``ServerManager`` (``env.server``), so any backend atroposlib talks to answers: vLLM,
SGLang, an OpenAI-compatible server, our engine. Both ask greedily (temperature 0) by default.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Optional

from atroposlib.interop.bfcl.entries import BfclEntry

PROMPT_MODE = "prompt"
FC_MODE = "fc"
MODES = (PROMPT_MODE, FC_MODE)


@dataclass(frozen=True)
class Reply:
    """The model's reply: its text, its parsed calls (FC mode) and whether it hit ``max_tokens``."""

    text: str
    calls: Optional[list[dict[str, Any]]] = None
    cut: bool = False


def hermes_tools_prompt(tools: Sequence[Mapping[str, Any]]) -> str:
    """A Hermes function-calling system prompt listing ``tools`` (OpenAI tool schemas), for chat
    templates that do not render ``tools=`` themselves."""
    listed = "\n".join(json.dumps(t.get("function", t)) for t in tools)
    return (
        "You are a function calling AI model. You are provided with function signatures within "
        f"<tools></tools> XML tags.\n<tools>\n{listed}\n</tools>\n"
        "For each function call return a JSON object with the function name and arguments within "
        '<tool_call></tool_call> XML tags: <tool_call>{"name": <function-name>, "arguments": '
        "<args-dict>}</tool_call>"
    )


def fc_messages(entry: BfclEntry, template_renders_tools: bool) -> list[dict[str, Any]]:
    """The FC-mode conversation: the question, after a system prompt listing the tools when the
    chat template would not show them."""
    user = {"role": "user", "content": entry.question}
    if template_renders_tools:
        return [user]
    return [{"role": "system", "content": hermes_tools_prompt(entry.tools)}, user]


def _calls(message: Any) -> list[dict[str, Any]]:
    calls = []
    for call in getattr(message, "tool_calls", None) or []:
        function: Any = call.get("function") if isinstance(call, Mapping) else call.function
        if isinstance(function, Mapping):
            name, arguments = function.get("name"), function.get("arguments", "{}")
        else:
            name, arguments = getattr(function, "name", None), getattr(function, "arguments", "{}")
        calls.append({"name": name, "arguments": arguments})
    return calls


async def ask_prompt_mode(
    server: Any, entry: BfclEntry, max_tokens: int, temperature: float = 0.0, **request: Any
) -> Reply:
    """One prompt-mode answer from ``server`` (a ``ServerManager``)."""
    completion = await server.chat_completion(
        messages=entry.chat(), n=1, temperature=temperature, max_tokens=max_tokens, **request
    )
    choice = completion.choices[0]
    return Reply(choice.message.content or "", cut=choice.finish_reason == "length")


async def ask_fc_mode(
    server: Any,
    tokenizer: Any,
    entry: BfclEntry,
    max_tokens: int,
    template_renders_tools: bool,
    temperature: float = 0.0,
    **request: Any,
) -> Reply:
    """One FC-mode answer: the managed server parses the Hermes calls (``server.tool_parser``)."""
    async with server.managed_server(tokenizer=tokenizer) as managed:
        completion = await managed.chat_completion(
            messages=fc_messages(entry, template_renders_tools),
            tools=[dict(t) for t in entry.tools],
            n=1,
            temperature=temperature,
            max_tokens=max_tokens,
            **request,
        )
    choice = completion.choices[0]
    return Reply(
        choice.message.content or "",
        calls=_calls(choice.message),
        cut=choice.finish_reason == "length",
    )


__all__ = [
    "FC_MODE",
    "MODES",
    "PROMPT_MODE",
    "Reply",
    "ask_fc_mode",
    "ask_prompt_mode",
    "fc_messages",
    "hermes_tools_prompt",
]
