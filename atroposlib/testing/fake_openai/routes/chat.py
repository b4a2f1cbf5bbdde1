"""POST /v1/chat/completions: the messages rendered with the tokenizer's chat template; vLLM's
extras ``return_token_ids`` and ``logprobs``."""

from __future__ import annotations

from typing import Any, Union

from fastapi import APIRouter, Depends, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse

from atroposlib.testing.fake_openai.deps import get_model
from atroposlib.testing.fake_openai.logprobs import chat_logprobs
from atroposlib.testing.fake_openai.refusals import received
from atroposlib.testing.fake_openai.scripted_model import ScriptedModel
from atroposlib.utils.openai_shapes import openai_choice, openai_response

router = APIRouter()


@router.post("/v1/chat/completions", response_model=None, status_code=200)
async def chat(
    request: Request, model: ScriptedModel = Depends(get_model)
) -> Union[dict[str, Any], JSONResponse]:
    body = await received(request, model)
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        return JSONResponse({"error": {"message": "messages must be a non-empty list"}}, 400)
    tok = model.tokenizer
    prompt_text = tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    prompt_ids = list(tok.encode(prompt_text, add_special_tokens=False))
    choices = []
    for i in range(int(body.get("n") or 1)):
        g = await run_in_threadpool(model.generate, prompt_text, body, i)
        ch = openai_choice("chat.completion", i, g.text, g.finish)
        if body.get("logprobs"):
            ch["logprobs"] = chat_logprobs(tok, g.ids, len(prompt_ids))
        if body.get("return_token_ids"):
            ch["token_ids"], ch["prompt_token_ids"] = g.ids, prompt_ids
        choices.append(ch)
    return openai_response("chat.completion", model.model, choices)


__all__ = ["router"]
