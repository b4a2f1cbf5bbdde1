"""The managed server's chat completion as the proxy answers it.

Each choice's text is read for tool calls (``message.tool_calls``, ``finish_reason="tool_calls"``);
the blocks that did not parse come back in ``message.tool_call_errors`` (each counted in the
session's stats). ``usage`` is on every answer: the prompt's token ids as the backend saw them and
every choice's generated ids. ``logprobs: true`` gives each generated token's logprob as the backend
reported it (the node's, which is what the trainer gets), in OpenAI's ``logprobs.content`` shape.
A reply that does not do what ``tool_choice`` / ``parallel_tool_calls`` asked is counted
(``tool_choice_unmet``): generation is not constrained, so the model may not comply.
"""

from __future__ import annotations

from typing import Any, Optional

from atroposlib.inference_clients.proxy.protocol import ChatCompletionProxyRequest
from atroposlib.inference_clients.proxy.sessions import SessionState
from atroposlib.inference_clients.proxy.state import ProxyState
from atroposlib.type_definitions import MASK_IGNORE
from atroposlib.utils.openai_shapes import openai_choice, openai_response, token_usage


def generated_ids(choice: Any) -> list[int]:
    """The token ids the backend generated for ``choice`` (the managed server's ``token_ids``)."""
    return [int(t) for t in (getattr(choice, "token_ids", None) or [])]


def token_logprobs(tokenizer: Any, ids: list[int], node: Any) -> list[dict[str, Any]]:
    """OpenAI's ``logprobs.content`` for the generated ``ids``, their logprobs from ``node`` (the
    last ``len(ids)`` positions it trains)."""
    lps = [lp for lp, m in zip(node.logprobs, node.masked_tokens, strict=True) if m != MASK_IGNORE]
    lps = lps[len(lps) - len(ids) :] if ids else []
    out = []
    for token_id, lp in zip(ids, lps, strict=True):
        text = tokenizer.decode([token_id], skip_special_tokens=False)
        out.append({"token": text, "logprob": lp, "bytes": list(text.encode()), "top_logprobs": []})
    return out


def _tool_choice_met(req: ChatCompletionProxyRequest, calls: list[Any]) -> bool:
    choice = req.tool_choice
    if req.parallel_tool_calls is False and len(calls) > 1:
        return False
    if choice == "required":
        return bool(calls)
    if isinstance(choice, dict):
        name = (choice.get("function") or {}).get("name")
        return bool(calls) and all(c.function.name == name for c in calls)
    return True


def reply_choice(
    choice: Any,
    req: ChatCompletionProxyRequest,
    session: SessionState,
    proxy: Optional[ProxyState] = None,
    node: Any = None,
) -> dict[str, Any]:
    """One OpenAI choice of the answer, from the managed server's ``choice`` (and the ``node`` it
    recorded, for ``logprobs``)."""
    choice_name = req.tool_choice if isinstance(req.tool_choice, str) else "auto"
    reply = session.translator.parse_reply(choice.message.content or "", choice_name, req.tools)
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
    if proxy is not None and req.tools and not _tool_choice_met(req, reply.calls):
        proxy.count("tool_choice_unmet", f"tool_choice {req.tool_choice!r} not met by the reply")
    if req.logprobs and node is not None and proxy is not None:
        ids = generated_ids(choice)
        answer["logprobs"] = {"content": token_logprobs(proxy.tokenizer, ids, node)}
    return answer


def usage_of(result: Any) -> dict[str, int]:
    """``usage``: the prompt ids the backend saw, the ids it generated over every choice."""
    prompt = (getattr(result, "model_extra", None) or {}).get("prompt_token_ids")
    usage = getattr(result, "usage", None)
    if prompt is None and usage is not None:  # a text-only backend's own count
        return token_usage(usage.prompt_tokens, usage.completion_tokens)
    return token_usage(len(prompt or []), sum(len(generated_ids(ch)) for ch in result.choices))


def chat_reply(
    result: Any,
    req: ChatCompletionProxyRequest,
    session: SessionState,
    model_name: str,
    proxy: Optional[ProxyState] = None,
    nodes: Optional[list[Any]] = None,
) -> dict[str, Any]:
    """The ``chat.completion`` answer for the managed server's ``result`` (``nodes``: what it
    recorded, one per choice in order)."""
    found = list(nodes or [])
    choices = [
        reply_choice(ch, req, session, proxy, found[i] if i < len(found) else None)
        for i, ch in enumerate(result.choices)
    ]
    return openai_response("chat.completion", model_name, choices, usage_of(result))


__all__ = ["chat_reply", "generated_ids", "reply_choice", "token_logprobs", "usage_of"]
