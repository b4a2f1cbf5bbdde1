"""The managed server's chat completion as the proxy answers it: each choice's text read for tool
calls (``message.tool_calls``, ``finish_reason="tool_calls"``), and the blocks that did not parse in
``message.tool_call_errors`` (each counted in the session's stats)."""

from __future__ import annotations

from typing import Any

from atroposlib.inference_clients.proxy.protocol import ChatCompletionProxyRequest
from atroposlib.inference_clients.proxy.sessions import SessionState
from atroposlib.utils.openai_shapes import openai_choice, openai_response


def reply_choice(
    choice: Any, req: ChatCompletionProxyRequest, session: SessionState
) -> dict[str, Any]:
    """One OpenAI choice of the answer, from the managed server's ``choice``."""
    reply = session.translator.parse_reply(choice.message.content or "", req.tool_choice, req.tools)
    finish = reply.finish_reason if reply.calls else choice.finish_reason
    answer = openai_choice("chat.completion", choice.index, reply.content, finish)
    if reply.calls:
        answer["message"]["tool_calls"] = [c.model_dump() for c in reply.calls]
    if reply.errors:
        for err in reply.errors:
            session.managed_server.stats.tool_parse_error(err.kind, err.raw)
        answer["message"]["tool_call_errors"] = [
            {"index": err.index, "kind": err.kind, "error": err.message, "raw": err.raw}
            for err in reply.errors
        ]
    return answer


def chat_reply(
    result: Any, req: ChatCompletionProxyRequest, session: SessionState, model_name: str
) -> dict[str, Any]:
    """The ``chat.completion`` answer for the managed server's ``result``."""
    choices = [reply_choice(ch, req, session) for ch in result.choices]
    return openai_response("chat.completion", model_name, choices)


__all__ = ["chat_reply", "reply_choice"]
