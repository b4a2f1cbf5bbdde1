"""Translate between OpenAI ``tool_calls`` and the raw text a model writes (Atropos's ``ToolCallTranslator``).

Outbound (model -> client): raw text with ``<tool_call>{json}</tool_call>`` blocks (the Hermes
format) becomes ``content`` + OpenAI tool calls, plus the blocks that are not calls, each with why
(``parse_reply``; the managed server hands them to the env as ``message.tool_call_errors``). Inbound (client -> model): an assistant message
carrying ``tool_calls`` is turned back into the raw text the model produced (exactly, when the
call id was produced here; rebuilt from the structured call otherwise), so the chat template
renders the tokens the model really generated.

The Hermes format is read and written by ``atroposlib.utils.tool_call_parser`` (the one Hermes
parser). Other vLLM parser names need vLLM installed (``VLLM_AVAILABLE``); without it they parse
nothing and say so once.
"""

from __future__ import annotations

import json
import logging
import uuid
import warnings
from dataclasses import dataclass, field
from typing import Any, Optional

from openai.types.chat.chat_completion_message_tool_call import (
    ChatCompletionMessageToolCall,
    Function,
)

from atroposlib.utils.tool_call_parser import (
    TOOL_CALL_TAG,
    HermesError,
    hermes_call_text,
    hermes_calls,
)

logger = logging.getLogger(__name__)

try:  # optional, as in Atropos: only for non-Hermes parsers
    from vllm.tool_parsers.abstract_tool_parser import ToolParserManager  # type: ignore

    VLLM_AVAILABLE = True
except Exception:  # ImportError, or a vLLM build that cannot load here
    ToolParserManager = None
    VLLM_AVAILABLE = False


def parse_hermes(raw_text: str) -> tuple[Optional[str], list[ChatCompletionMessageToolCall]]:
    """``(content before the first call or None, calls)``; malformed blocks are left out (see
    ``parse_hermes_reply`` for them)."""
    reply = parse_hermes_reply(raw_text)
    return reply.content, reply.calls


@dataclass
class ParsedReply:
    """A reply read for tool calls: ``content`` (the text before the first call, None when there is
    none; the whole text when no block is a call), the well-formed ``calls``, ``errors`` (the blocks
    that are not calls, with why) and the ``finish_reason`` (``tool_calls`` when there is a call)."""

    content: Optional[str]
    calls: list[ChatCompletionMessageToolCall] = field(default_factory=list)
    errors: list[HermesError] = field(default_factory=list)
    finish_reason: str = "stop"


def parse_hermes_reply(raw_text: str) -> ParsedReply:
    """Every ``<tool_call>`` block of ``raw_text`` as an OpenAI tool call or as an error
    (``atroposlib.utils.tool_call_parser.hermes_calls`` has the rules)."""
    found, errors = hermes_calls(raw_text)
    calls = [
        ChatCompletionMessageToolCall(
            id=f"call_{uuid.uuid4().hex[:24]}",
            type="function",
            function=Function(name=c.name, arguments=json.dumps(c.arguments, ensure_ascii=False)),
        )
        for c in found
    ]
    if not calls:
        return ParsedReply(raw_text, [], errors)
    content = raw_text[: raw_text.find(f"<{TOOL_CALL_TAG}>")].strip()
    return ParsedReply(content or None, calls, errors, "tool_calls")


class ToolCallTranslator:
    """See the module docstring; ``call_id_to_raw_text`` remembers the text behind each call id."""

    def __init__(self, tokenizer: Any, parser_name: str = "hermes") -> None:
        self.tokenizer = tokenizer
        self.parser_name = parser_name
        self.parser: Any = None
        if parser_name != "hermes":
            if VLLM_AVAILABLE:
                self.parser = ToolParserManager.get_tool_parser(parser_name)(tokenizer)
            else:
                warnings.warn(
                    f"tool parser {parser_name!r} needs vLLM, which is not installed: tool calls "
                    "will not be parsed (the built-in parser is 'hermes')",
                    stacklevel=2,
                )
        self.call_id_to_raw_text: dict[str, str] = {}

    def parse_model_output(
        self,
        raw_text: str,
        tool_choice: Optional[str] = None,
        tools: Optional[list[dict]] = None,
    ) -> tuple[Optional[str], Optional[list[ChatCompletionMessageToolCall]], str]:
        """``(content, tool_calls or None, finish_reason)`` for a model's raw output."""
        reply = self.parse_reply(raw_text, tool_choice, tools)
        return reply.content, (reply.calls or None), reply.finish_reason

    def parse_reply(
        self,
        raw_text: str,
        tool_choice: Optional[str] = None,
        tools: Optional[list[dict]] = None,
    ) -> ParsedReply:
        """A model's raw output read for tool calls, with the blocks that did not parse (Hermes;
        vLLM's other parsers report no errors)."""
        if tool_choice == "none" or not tools:
            return ParsedReply(raw_text)
        if self.parser_name == "hermes":
            reply = parse_hermes_reply(raw_text)
        elif self.parser is not None:
            from vllm.entrypoints.openai.chat_completion.protocol import (  # type: ignore
                ChatCompletionRequest,
            )

            request = ChatCompletionRequest(
                messages=[{"role": "user", "content": ""}],
                model="proxy",
                tools=tools,
                tool_choice=tool_choice,
            )
            result = self.parser.extract_tool_calls(raw_text, request)
            calls = list(result.tool_calls or [])
            reply = (
                ParsedReply(result.content, calls, [], "tool_calls")
                if calls
                else ParsedReply(raw_text)
            )
        else:
            return ParsedReply(raw_text)
        for call in reply.calls:
            self.call_id_to_raw_text[call.id] = raw_text
        return reply

    def reconstruct_raw_text_from_tool_calls(self, tool_calls: list[dict]) -> str:
        """The raw text behind ``tool_calls`` (exact when the first id is known)."""
        if not tool_calls:
            return ""
        first = tool_calls[0].get("id", "")
        if first in self.call_id_to_raw_text:
            return self.call_id_to_raw_text[first]
        parts = []
        for tc in tool_calls:
            fn = tc.get("function", {}) or {}
            args = fn.get("arguments", "{}")
            try:
                args = json.loads(args) if isinstance(args, str) else args
            except json.JSONDecodeError:
                pass
            parts.append(hermes_call_text(fn.get("name", ""), args))
        return "\n".join(parts)

    def convert_messages_for_template(self, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Messages with every assistant ``tool_calls`` message replaced by its raw text."""
        out = []
        for msg in messages:
            if msg.get("role") == "assistant" and msg.get("tool_calls"):
                calls = msg["tool_calls"]
                exact = calls[0].get("id", "") in self.call_id_to_raw_text
                raw = self.reconstruct_raw_text_from_tool_calls(calls)
                if not exact and msg.get("content"):
                    raw = f"{msg['content']}\n{raw}"
                out.append({"role": "assistant", "content": raw})
            else:
                out.append(msg)
        return out

    def decode_with_tool_awareness(self, token_ids: list[int], has_tools: bool = False) -> str:
        """Decode, keeping special tokens when tools are active (``<tool_call>`` may be one)."""
        return self.tokenizer.decode(token_ids, skip_special_tokens=not has_tools)


__all__ = [
    "VLLM_AVAILABLE",
    "ParsedReply",
    "ToolCallTranslator",
    "parse_hermes",
    "parse_hermes_reply",
]
