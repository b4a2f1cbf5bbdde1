"""POST /v1/completions: a prompt as text or token ids (or a batch of one); vLLM's extras
``return_token_ids``, ``logprobs`` and ``prompt_logprobs``; ``usage`` counts the returned ids."""

from __future__ import annotations

from typing import Any, Optional, Union

from fastapi import APIRouter, Depends, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse

from atroposlib.testing.fake_openai.deps import get_model
from atroposlib.testing.fake_openai.logprobs import completion_logprobs, fake_prompt_logprobs
from atroposlib.testing.fake_openai.refusals import received
from atroposlib.testing.fake_openai.scripted_model import Generation, ScriptedModel
from atroposlib.utils.openai_shapes import openai_choice, openai_response, token_usage

router = APIRouter()


def read_prompt(tokenizer: Any, prompt: Any) -> Optional[tuple[str, list[int]]]:
    """The prompt's text and token ids; None when it is neither text nor token ids."""
    if isinstance(prompt, list) and prompt and isinstance(prompt[0], list):
        prompt = prompt[0]
    if isinstance(prompt, list):
        prompt_ids = [int(t) for t in prompt]
        return tokenizer.decode(prompt_ids, skip_special_tokens=False), prompt_ids
    if isinstance(prompt, str):
        return prompt, list(tokenizer.encode(prompt, add_special_tokens=True))
    return None


def completion_choice(
    model: ScriptedModel, body: dict[str, Any], prompt_ids: list[int], index: int, g: Generation
) -> dict[str, Any]:
    """Choice ``index`` of the answer, with the extras ``body`` asks for."""
    ch = openai_choice("text_completion", index, g.text, g.finish)
    if body.get("logprobs") not in (None, False):
        ch["logprobs"] = completion_logprobs(
            model.tokenizer, g.ids, len(prompt_ids), model.logprob_gaps
        )
    if body.get("return_token_ids"):
        ch["token_ids"], ch["prompt_token_ids"] = g.ids, prompt_ids
    if body.get("prompt_logprobs") is not None:
        ch["prompt_logprobs"] = fake_prompt_logprobs(prompt_ids, int(body["prompt_logprobs"]))
        ch["prompt_token_ids"] = prompt_ids
    return ch


@router.post("/v1/completions", response_model=None, status_code=200)
async def completions(
    request: Request, model: ScriptedModel = Depends(get_model)
) -> Union[dict[str, Any], JSONResponse]:
    body = await received(request, model)
    prompt = read_prompt(model.tokenizer, body.get("prompt"))
    if prompt is None:
        return JSONResponse(
            {"error": {"message": "prompt must be a string or a list of token ids"}}, 400
        )
    prompt_text, prompt_ids = prompt
    choices = []
    for i in range(int(body.get("n") or 1)):
        g = await run_in_threadpool(model.generate, prompt_text, body, i)
        choices.append(completion_choice(model, body, prompt_ids, i, g))
    n_out = sum(len(c.get("token_ids") or []) for c in choices)
    usage = token_usage(len(prompt_ids), n_out)
    return openai_response("text_completion", model.model, choices, usage)


__all__ = ["completion_choice", "read_prompt", "router"]
