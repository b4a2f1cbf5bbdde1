"""POST /generate, SGLang's native route: ``input_ids`` (or ``text``), one prompt or a batch;
``meta_info`` carries the token counts, logprobs when asked and the weights version when set."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, Request
from fastapi.concurrency import run_in_threadpool

from atroposlib.testing.fake_openai.deps import get_model
from atroposlib.testing.fake_openai.logprobs import sglang_logprobs
from atroposlib.testing.fake_openai.refusals import received
from atroposlib.testing.fake_openai.scripted_model import ScriptedModel

router = APIRouter()


async def generate_one(
    model: ScriptedModel, prompt: Any, gen_body: dict[str, Any], index: int, logprobs: bool
) -> dict[str, Any]:
    """SGLang's answer for one prompt (token ids or text)."""
    tok = model.tokenizer
    ids = [int(t) for t in prompt] if isinstance(prompt, list) else list(tok.encode(prompt))
    text = tok.decode(ids, skip_special_tokens=False)
    g = await run_in_threadpool(model.generate, text, gen_body, index)
    meta: dict[str, Any] = {
        "prompt_tokens": len(ids),
        "completion_tokens": len(g.ids),
        "finish_reason": {"type": g.finish},
    }
    if logprobs:
        meta["output_token_logprobs"] = sglang_logprobs(g.ids, len(ids), model.logprob_gaps)
    if model.weights_version is not None:
        meta["weight_version"] = model.weights_version
    return {"text": g.text, "output_ids": g.ids, "meta_info": meta}


@router.post("/generate", response_model=None, status_code=200)
async def sglang_generate(request: Request, model: ScriptedModel = Depends(get_model)) -> Any:
    """SGLang's native route: ``input_ids`` (or ``text``), ``sampling_params``, ``return_logprob``."""
    body = await received(request, model, check_model=False)
    batch: Any = body.get("input_ids", body.get("text"))
    single = not (isinstance(batch, list) and batch and isinstance(batch[0], (list, str)))
    prompts = [batch] if single else batch
    params = dict(body.get("sampling_params") or {})
    gen_body = {"max_tokens": params.get("max_new_tokens")}
    logprobs = bool(body.get("return_logprob"))
    results = [await generate_one(model, p, gen_body, i, logprobs) for i, p in enumerate(prompts)]
    return results[0] if single else results


__all__ = ["generate_one", "router"]
