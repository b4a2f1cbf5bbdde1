"""An OpenAI chat request as the proxy's managed server takes it: the messages as the chat template
reads them (tool calls turned back into the model's own text), the generation arguments, and the
prompt text the template renders."""

from __future__ import annotations

from typing import Any, Optional

from atroposlib.inference_clients.managed_server import ManagedServer
from atroposlib.inference_clients.proxy.protocol import ChatCompletionProxyRequest, ChatMessage
from atroposlib.inference_clients.tool_call_translator import ToolCallTranslator
from atroposlib.utils.tokenize_for_trainer import render_chat


def template_messages(
    messages: list[ChatMessage], translator: ToolCallTranslator
) -> list[dict[str, Any]]:
    """``messages`` as plain dicts for the chat template, OpenAI ``tool_calls`` as raw text."""
    return translator.convert_messages_for_template(
        [m.model_dump(exclude_none=True) for m in messages]
    )


def generation_kwargs(req: ChatCompletionProxyRequest, managed_server: Any) -> dict[str, Any]:
    """The managed server's ``chat_completion`` arguments besides the messages (the tools go to
    the chat template only where the server renders it: a token-exact ``ManagedServer``)."""
    kwargs: dict[str, Any] = {"n": req.n, "max_tokens": req.max_tokens}
    kwargs["temperature"] = req.temperature
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


__all__ = ["generation_kwargs", "render_prompt_text", "template_messages"]
