"""A session's chat: POST /{uuid}/v1/chat/completions (generated through the session's managed
server, which records it; tool calls parsed out of the reply) and POST
/{uuid}/v1/chat/completions/render (the prompt text and token ids the request would generate from)."""

from __future__ import annotations

import logging
from typing import Any, Union

from fastapi import APIRouter, Depends
from fastapi.responses import JSONResponse

from atroposlib.inference_clients.proxy.deps import get_proxy
from atroposlib.inference_clients.proxy.http import openai_error
from atroposlib.inference_clients.proxy.protocol import ChatCompletionProxyRequest
from atroposlib.inference_clients.proxy.reply_translation import chat_reply
from atroposlib.inference_clients.proxy.request_translation import (
    generation_kwargs,
    render_prompt_text,
    template_messages,
)
from atroposlib.inference_clients.proxy.state import ProxyState

logger = logging.getLogger(__name__)
router = APIRouter()


@router.post("/{session_uuid}/v1/chat/completions", response_model=None, status_code=200)
async def chat(
    session_uuid: str, req: ChatCompletionProxyRequest, proxy: ProxyState = Depends(get_proxy)
) -> Union[dict[str, Any], JSONResponse]:
    s = proxy.session(session_uuid)
    if not req.messages:
        return openai_error(400, "messages must not be empty")
    msgs = template_messages(req.messages, s.translator)
    kwargs = generation_kwargs(req, s.managed_server)
    try:
        result = await s.managed_server.chat_completion(messages=msgs, **kwargs)
    except Exception as e:
        logger.exception("proxy completion failed")
        return openai_error(500, f"Completion failed: {e}", error_type="server_error")
    return chat_reply(result, req, s, proxy.model_name)


@router.post("/{session_uuid}/v1/chat/completions/render", response_model=None, status_code=200)
async def render_prompt(
    session_uuid: str, req: ChatCompletionProxyRequest, proxy: ProxyState = Depends(get_proxy)
) -> Union[dict[str, Any], JSONResponse]:
    s = proxy.session(session_uuid)
    try:
        text = render_prompt_text(proxy.tokenizer, req.messages, req.tools, s.translator)
    except Exception as e:
        return openai_error(400, f"Failed to render prompt: {e}")
    ids = list(proxy.tokenizer.encode(text, add_special_tokens=False))
    return {"prompt_text": text, "token_ids": ids, "num_tokens": len(ids)}


__all__ = ["router"]
