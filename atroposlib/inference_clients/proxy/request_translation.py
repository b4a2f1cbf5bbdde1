"""An OpenAI chat request as the proxy's managed server takes it, or the 4xx that says why not.

``check_request`` refuses, naming the field, what the proxy cannot honour, never dropping it: a
field outside the ones below, ``response_format`` other than text (no constrained decoding),
``top_logprobs`` (only the sampled tokens' logprobs are served), ``store: true``, ``stream_options``
without ``stream``, a model other than the served one (404), ``n`` past ``--max-n``, a content part
that is not text, a role the chat template does not know, a message field that would be lost, and
a completion past the session's ``max_turns``.

What passes through: ``template_messages`` turns the messages into what the chat template reads
(string contents: text parts joined with newlines, as vLLM does; ``developer`` is ``system``; an
assistant ``content: null`` without tool calls is empty; tool calls back into the model's own text);
``generation_kwargs`` gives the managed server every sampling field the backends honour
(``temperature``, ``top_p``, ``top_k``, ``seed``, ``presence_penalty``, ``frequency_penalty``,
``stop``, ``n``) and the reply budget: ``max_completion_tokens`` or ``max_tokens``, else the rest of
the backend's context, else ``--default-max-tokens``. ``tools``, ``tool_choice`` and replayed
``tool_calls`` must have OpenAI's shapes (a 400 naming the entry otherwise). A backend that cannot serve a value (our
engine refuses penalties other than 0) answers a 400 naming it, which the client gets as it is.
"""

from __future__ import annotations

from typing import Any, Optional

from atroposlib.inference_clients.managed_server import ManagedServer, check_tools
from atroposlib.inference_clients.proxy.http import refuse
from atroposlib.inference_clients.proxy.protocol import ChatCompletionProxyRequest, ChatMessage
from atroposlib.inference_clients.proxy.sessions import SessionState
from atroposlib.inference_clients.proxy.state import ProxyState
from atroposlib.inference_clients.tool_call_translator import ToolCallTranslator
from atroposlib.utils.tokenize_for_trainer import render_chat

ROLES = ("system", "developer", "user", "assistant", "tool")
SAMPLING_FIELDS = ("top_p", "top_k", "seed", "presence_penalty", "frequency_penalty")
TOOL_CHOICES = ("none", "auto", "required")


def _refusal(req: ChatCompletionProxyRequest) -> Optional[tuple[str, str]]:
    """(field, why) for the first field of ``req`` the proxy cannot honour, else None."""
    extras = sorted(k for k, v in (req.model_extra or {}).items() if v not in (None, "", [], {}))
    if extras:
        return extras[0], f"{extras[0]}: not a field the proxy serves (it refuses, never drops it)"
    kind = (req.response_format or {}).get("type", "text")
    if kind != "text":
        return "response_format", (
            f"response_format: {kind!r} needs constrained decoding, which the proxy does not do"
        )
    if req.top_logprobs:
        return "top_logprobs", (
            "top_logprobs: the proxy returns the sampled tokens' logprobs only (logprobs: true)"
        )
    if req.store:
        return "store", "store: the proxy keeps no completions for later retrieval"
    if req.stream_options is not None and not req.stream:
        return "stream_options", "stream_options: only with stream: true"
    if req.tools is not None:
        try:
            check_tools(req.tools)
        except ValueError as e:
            return "tools", str(e)
    choice = req.tool_choice
    fn = choice.get("function") if isinstance(choice, dict) else None
    named = isinstance(fn, dict) and isinstance(fn.get("name"), str)
    if choice is not None and choice not in TOOL_CHOICES and not named:
        return "tool_choice", (
            f"tool_choice: one of {', '.join(TOOL_CHOICES)}, or "
            '{"type": "function", "function": {"name": ...}}'
        )
    return None


def _message_refusal(i: int, m: ChatMessage) -> Optional[tuple[str, str]]:
    """(field, why) for what message ``i`` holds that the proxy cannot render, else None."""
    if m.role not in ROLES:
        return (
            f"messages[{i}].role",
            f"messages[{i}].role: one of {', '.join(ROLES)}, not {m.role!r}",
        )
    extras = sorted(k for k, v in (m.model_extra or {}).items() if v not in (None, "", [], {}))
    if extras:
        where = f"messages[{i}].{extras[0]}"
        return where, f"{where}: not rendered by the chat template (it would be lost)"
    for j, call in enumerate(m.tool_calls or []):
        fn = call.get("function")
        if not (
            isinstance(fn, dict)
            and isinstance(fn.get("name"), str)
            and isinstance(fn.get("arguments", ""), (str, dict))
            and isinstance(call.get("id", ""), str)
        ):
            where = f"messages[{i}].tool_calls[{j}]"
            return where, (
                f'{where}: expected {{"id": ..., "type": "function", "function": {{"name": ..., '
                '"arguments": ...}}'
            )
    for j, part in enumerate(m.content if isinstance(m.content, list) else []):
        kind = part.get("type")
        if kind != "text" or not isinstance(part.get("text"), str):
            where = f"messages[{i}].content[{j}]"
            return where, f"{where}: only text parts are served (got type {kind!r})"
    return None


def check_request(
    req: ChatCompletionProxyRequest, proxy: ProxyState, session: SessionState
) -> None:
    """Raise the 4xx for the first thing in ``req`` the proxy cannot do (module docstring)."""
    if req.model is not None and req.model != proxy.model_name:
        raise _refused(
            proxy,
            404,
            "model",
            f"The model `{req.model}` does not exist. Served: `{proxy.model_name}` (GET /v1/models)",
        )
    if not req.messages:
        raise _refused(proxy, 400, "messages", "messages: must not be empty")
    found = _refusal(req) or next(
        (r for i, m in enumerate(req.messages) if (r := _message_refusal(i, m))), None
    )
    if found is not None:
        raise _refused(proxy, 400, *found)
    if req.n > proxy.settings.max_n:
        raise _refused(
            proxy, 400, "n", f"n: at most {proxy.settings.max_n} (the proxy's --max-n), got {req.n}"
        )
    if session.max_turns is not None and session.turns >= session.max_turns:
        session.turn_limit_hit = True
        raise _refused(
            proxy,
            400,
            "messages",
            f"this session's turn limit ({session.max_turns} chat completions) is reached",
        )


def _refused(proxy: ProxyState, status: int, field: str, why: str) -> Exception:
    proxy.counts[f"refused:{field}"] += 1
    return refuse(status, why, field)


def message_text(content: Any) -> Optional[str]:
    """A message's content as the chat template reads it: text parts joined with newlines."""
    if isinstance(content, list):
        return "\n".join(str(part.get("text", "")) for part in content)
    return content if content is None else str(content)


def template_messages(
    messages: list[ChatMessage], translator: ToolCallTranslator
) -> list[dict[str, Any]]:
    """``messages`` as plain dicts for the chat template, OpenAI ``tool_calls`` as raw text."""
    plain = []
    for m in messages:
        msg: dict[str, Any] = {"role": "system" if m.role == "developer" else m.role}
        content = message_text(m.content)
        if content is None and not (m.role == "assistant" and m.tool_calls):
            content = ""
        if content is not None:
            msg["content"] = content
        for key in ("tool_calls", "tool_call_id", "name"):
            if getattr(m, key):
                msg[key] = getattr(m, key)
        plain.append(msg)
    return translator.convert_messages_for_template(plain)


def reply_budget(req: ChatCompletionProxyRequest, proxy: ProxyState, session: SessionState) -> int:
    """The reply's ``max_tokens``: the client's, else the rest of the backend's context, else
    ``--default-max-tokens``; a prompt that fills the context is a 400."""
    if req.token_budget is not None:
        return req.token_budget
    if proxy.max_model_len is None:
        return proxy.settings.default_max_tokens
    text = render_prompt_text(proxy.tokenizer, req.messages, req.tools, session.translator)
    used = len(proxy.tokenizer.encode(text, add_special_tokens=False))
    room = proxy.max_model_len - used
    if room < 1:
        raise _refused(
            proxy,
            400,
            "messages",
            f"messages: the prompt ({used} tokens) leaves no room in the model's context "
            f"({proxy.max_model_len} tokens)",
        )
    return room


def generation_kwargs(
    req: ChatCompletionProxyRequest, managed_server: Any, max_tokens: int
) -> dict[str, Any]:
    """The managed server's ``chat_completion`` arguments besides the messages (the tools go to
    the chat template only where the server renders it: a token-exact ``ManagedServer``)."""
    kwargs: dict[str, Any] = {"n": req.n, "max_tokens": max_tokens}
    kwargs["temperature"] = req.temperature
    for name in SAMPLING_FIELDS:
        value = getattr(req, name)
        if value is not None:
            kwargs[name] = value
    if req.stop:
        kwargs["stop"] = req.stop
    if req.tools and isinstance(managed_server, ManagedServer):
        kwargs["chat_template_kwargs"] = {"tools": req.tools}
    return kwargs


def render_prompt_text(
    tokenizer: Any,
    messages: list[ChatMessage],
    tools: Optional[list[dict]],
    translator: ToolCallTranslator,
) -> str:
    """The prompt the chat template makes of ``messages`` (and ``tools``), ready for generation."""
    msgs = template_messages(messages, translator)
    if tools:
        text: str = tokenizer.apply_chat_template(
            msgs, tokenize=False, add_generation_prompt=True, tools=tools
        )
        return text
    return render_chat(tokenizer, msgs, add_generation_prompt=True)


__all__ = [
    "ROLES",
    "SAMPLING_FIELDS",
    "check_request",
    "generation_kwargs",
    "message_text",
    "render_prompt_text",
    "reply_budget",
    "template_messages",
]
