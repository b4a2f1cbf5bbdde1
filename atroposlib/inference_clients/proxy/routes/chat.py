"""A session's chat: POST /{uuid}/v1/chat/completions (generated through the session's managed
server, which records it; tool calls parsed out of the reply; JSON, or server-sent events with
``stream: true``) and POST /{uuid}/v1/chat/completions/render (the prompt text and token ids the
request would generate from).

A completion is checked first (``request_translation.check_request``: a 4xx naming what cannot be
served), then generated; the backend's refusals keep their 4xx (``http.backend_error``). The nodes it
recorded are taken back when the client is gone before it has the whole answer
(``recording.Recording``): nothing the client did not receive is trained.
"""

from __future__ import annotations

import logging
from typing import Any, Union

from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse, StreamingResponse

from atroposlib.inference_clients.proxy.deps import get_proxy
from atroposlib.inference_clients.proxy.http import backend_error, refuse
from atroposlib.inference_clients.proxy.protocol import ChatCompletionProxyRequest
from atroposlib.inference_clients.proxy.recording import Recording
from atroposlib.inference_clients.proxy.reply_translation import chat_reply, generated_ids
from atroposlib.inference_clients.proxy.request_translation import (
    check_request,
    generation_kwargs,
    render_prompt_text,
    reply_budget,
    template_messages,
)
from atroposlib.inference_clients.proxy.responses import CHAT_RESPONSES, RENDER_RESPONSES
from atroposlib.inference_clients.proxy.sessions import SessionState
from atroposlib.inference_clients.proxy.state import ProxyState
from atroposlib.inference_clients.proxy.streaming import delivered_stream, stream_events

logger = logging.getLogger(__name__)
router = APIRouter()


async def _generate(
    req: ChatCompletionProxyRequest, proxy: ProxyState, s: SessionState
) -> tuple[Any, Recording]:
    """The managed server's answer to ``req`` and what it recorded (one more turn served)."""
    msgs = template_messages(req.messages, s.translator)
    kwargs = generation_kwargs(req, s.managed_server, reply_budget(req, proxy, s))
    recording = Recording.start(s.managed_server)
    s.turns += 1
    try:
        result = await s.managed_server.chat_completion(messages=msgs, **kwargs)
    except Exception as e:  # noqa: BLE001 - every failure becomes an answer naming it
        proxy.count("backend_errors", f"{type(e).__name__}: {e}")
        answer = backend_error(e)
        if answer is None:
            logger.exception("proxy completion failed")
            answer = refuse(500, f"completion failed: {type(e).__name__}: {e}")
        raise answer from e
    return result, recording


@router.post(
    "/{session_uuid}/v1/chat/completions",
    response_model=None,
    status_code=200,
    responses=CHAT_RESPONSES,
)
async def chat(
    session_uuid: str,
    req: ChatCompletionProxyRequest,
    request: Request,
    proxy: ProxyState = Depends(get_proxy),
) -> Union[dict[str, Any], JSONResponse, StreamingResponse]:
    s = proxy.session(session_uuid)
    check_request(req, proxy, s)
    result, recording = await _generate(req, proxy, s)
    ids = {
        "prompt_token_ids": list((result.model_extra or {}).get("prompt_token_ids") or []),
        "token_ids": [generated_ids(ch) for ch in result.choices],
        "temperature": req.temperature,
    }
    s.completions.append(ids)

    def undelivered() -> None:
        taken = recording.undo()
        s.completions[:] = [c for c in s.completions if c is not ids]
        proxy.count("undelivered", f"the client left before its answer; {taken} node(s) taken back")

    if await request.is_disconnected():
        undelivered()
        return JSONResponse({}, status_code=499)
    answer = chat_reply(result, req, s, proxy.model_name, proxy, recording.added())
    if not req.stream:
        return answer
    include_usage = bool(req.stream_options and req.stream_options.include_usage)
    events = stream_events(answer, result, proxy.tokenizer, include_usage)
    return StreamingResponse(delivered_stream(events, undelivered), media_type="text/event-stream")


@router.post(
    "/{session_uuid}/v1/chat/completions/render",
    response_model=None,
    status_code=200,
    responses=RENDER_RESPONSES,
)
async def render_prompt(
    session_uuid: str, req: ChatCompletionProxyRequest, proxy: ProxyState = Depends(get_proxy)
) -> Union[dict[str, Any], JSONResponse]:
    s = proxy.session(session_uuid)
    try:
        text = render_prompt_text(proxy.tokenizer, req.messages, req.tools, s.translator)
    except Exception as e:
        raise refuse(400, f"Failed to render prompt: {e}", "messages") from e
    ids = list(proxy.tokenizer.encode(text, add_special_tokens=False))
    return {"prompt_text": text, "token_ids": ids, "num_tokens": len(ids)}


__all__ = ["router"]
