"""OpenAI-compatible generation: POST /v1/completions, POST /v1/chat/completions, GET /v1/models.

A prompt is text or token ids (one or a batch); ``n`` rows per prompt go to the engine's batch
queue together. ``stream: true`` answers through ``routes.streaming``.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends
from fastapi.responses import JSONResponse, StreamingResponse

from atroposlib.inference.deps import get_served
from atroposlib.inference.http import BadRequest
from atroposlib.inference.openapi import SSE_EVENT, errors
from atroposlib.inference.protocol import (
    ChatCompletionRequest,
    CompletionRequest,
    chat_response,
    completion_response,
)
from atroposlib.inference.routes.streaming import stream_response
from atroposlib.inference.served import ServedModel

router = APIRouter()

GENERATION_ANSWERS = {
    200: {
        "description": "The completion (JSON), or with stream=true its server-sent events.",
        "content": {"text/event-stream": {"schema": SSE_EVENT}},
    },
    **errors(400, 404, 500, 503),
}


def check_unsupported(req: Any) -> None:
    """400 for the OpenAI parameters the engine does not implement (rather than ignoring them)."""
    if req.stream_options is not None and not req.stream:
        raise BadRequest("Stream options can only be defined when `stream=True`.", "stream_options")
    for name in ("presence_penalty", "frequency_penalty"):
        if getattr(req, name):
            raise BadRequest(f"{name} is not supported (only 0)", name)
    if getattr(req, "echo", False):
        raise BadRequest("echo=true is not supported", "echo")


def prompt_list(prompt: Any, vocab: int) -> list[list[int]] | list[str]:
    """The prompts of a completion request: one text, a batch of texts, or token-id lists."""
    if isinstance(prompt, str):
        return [prompt]
    if not prompt:
        raise BadRequest("prompt must not be empty", "prompt")
    if all(isinstance(x, int) for x in prompt):
        prompts: list[Any] = [list(prompt)]
    else:
        prompts = list(prompt)
    for p in prompts:
        if isinstance(p, list):
            if not p:
                raise BadRequest("a token-id prompt must not be empty", "prompt")
            bad = [t for t in p if not 0 <= t < vocab]
            if bad:
                raise BadRequest(
                    f"token id {bad[0]} is outside the vocabulary (0..{vocab - 1})", "prompt"
                )
    return prompts


@router.post("/v1/completions", response_model=None, responses=GENERATION_ANSWERS)
async def completions(
    req: CompletionRequest, served: ServedModel = Depends(get_served)
) -> JSONResponse | StreamingResponse:
    served.check_model(req.model)
    check_unsupported(req)
    prompts = prompt_list(req.prompt, served.vocab)
    ids_list = [p if isinstance(p, list) else served.encode(p, "prompt") for p in prompts]
    max_tokens = req.max_tokens if req.max_tokens is not None else served.config.default_max_tokens
    top = req.logprobs or 0
    rows = [r for ids in ids_list for r in served.rows_for(ids, req, max_tokens, top)]
    if req.stream:
        return stream_response(served, "completion", req, ids_list, rows, req.logprobs)
    results = await served.run(rows)
    render = served.renderer(req.return_tokens_as_token_ids)
    return JSONResponse(
        completion_response(
            served.name, ids_list, req.n, results, render, req.logprobs, req.return_token_ids
        )
    )


@router.post("/v1/chat/completions", response_model=None, responses=GENERATION_ANSWERS)
async def chat(
    req: ChatCompletionRequest, served: ServedModel = Depends(get_served)
) -> JSONResponse | StreamingResponse:
    served.check_model(req.model)
    check_unsupported(req)
    tok = served.tokenizer
    if getattr(tok, "chat_template", None) is None:
        raise BadRequest(
            "the served tokenizer has no chat template; use /v1/completions", "messages"
        )
    messages = []
    for m in req.messages:
        content = m.content
        if isinstance(content, list):
            content = "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
        messages.append({"role": m.role, "content": content or ""})
    try:
        text = tok.apply_chat_template(
            messages, tokenize=False, add_generation_prompt=req.add_generation_prompt
        )
    except Exception as e:
        raise BadRequest(f"chat template failed on these messages: {e}", "messages") from e
    ids = served.encode(text, "messages", add_special_tokens=False)
    max_tokens = req.max_completion_tokens or req.max_tokens
    top = (req.top_logprobs or 0) if req.logprobs else 0
    if req.top_logprobs and not req.logprobs:
        raise BadRequest("top_logprobs requires logprobs=true", "top_logprobs")
    rows = served.rows_for(ids, req, max_tokens, top)
    if req.stream:
        return stream_response(served, "chat", req, [ids], rows, top if req.logprobs else None)
    results = await served.run(rows)
    render = served.renderer(req.return_tokens_as_token_ids)
    return JSONResponse(
        chat_response(served.name, ids, results, render, req.logprobs, top, req.return_token_ids)
    )


@router.get("/v1/models")
async def models(served: ServedModel = Depends(get_served)) -> dict[str, Any]:
    eng = served.engine

    def card(model_id: str, root: object, parent: str | None) -> dict[str, Any]:
        return {
            "id": model_id,
            "object": "model",
            "created": 0,
            "owned_by": "atroposlib",
            "root": str(root),
            "parent": parent,
            "max_model_len": eng.max_model_len,
        }

    data = [card(served.name, eng.model_path, None)]
    data += [card(lora, path, served.name) for lora, path in list(eng.adapters.items())]
    return {"object": "list", "data": data}


__all__ = ["check_unsupported", "prompt_list", "router"]
