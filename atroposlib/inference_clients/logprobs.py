"""Prompt logprobs (Atropos's ``get_logprobs``), normalised to one schema for every backend.

``{"prompt_tokens": [ids], "prompt_topk_token_ids": [[ids]], "prompt_topk_logprobs": [[floats]]}``:
one row per prompt token, best first: the server's top-k alternatives plus the prompt token itself
when it is not among them (as vLLM reports them, and as Atropos passed them on). The first prompt
token has no logprob (nothing precedes it): its row is empty.
"""

from __future__ import annotations

import math
from typing import Any, Optional

from atroposlib.errors import InferenceError

LOGPROB_KEYS = ("prompt_tokens", "prompt_topk_token_ids", "prompt_topk_logprobs")


MISSING_LOGPROB = math.nan
"""A generated token's logprob the server did not give: unknown, never 0.0 (probability 1). A group
holding one is sent without ``inference_logprobs`` (``groups.unknown_logprobs``)."""


def token_logprobs(values: Optional[list[Any]], n_tokens: int) -> tuple[list[float], bool]:
    """One logprob per generated token from a server's list (None entries or a short list are
    ``MISSING_LOGPROB``); and whether every token had one."""
    got = [float(v) if v is not None else MISSING_LOGPROB for v in (values or [])][:n_tokens]
    got += [MISSING_LOGPROB] * (n_tokens - len(got))
    return got, all(math.isfinite(v) for v in got)


class PromptLogprobsMixin:
    """``get_logprobs`` for ``APIServer``: limits, retries and timings of the server, then the
    backend's ``_get_logprobs_wrapper`` (servers that cannot score prompts raise
    ``NotImplementedError``)."""

    async def get_logprobs(self, **kwargs: Any) -> dict[str, Any]:
        kwargs["model"] = self.config.model_name  # type: ignore[attr-defined]
        split = kwargs.pop("split", "train")
        out = await self._with_retries(split, self._get_logprobs_wrapper, **kwargs)  # type: ignore[attr-defined]
        missing = [k for k in LOGPROB_KEYS if k not in out]
        if missing:
            raise InferenceError(f"get_logprobs answer lacks {missing}")
        return out

    async def _get_logprobs_wrapper(self, **kwargs: Any) -> dict[str, Any]:
        raise NotImplementedError(
            f"{type(self).__name__} cannot score prompts (get_logprobs needs server_type vllm)"
        )


async def vllm_prompt_logprobs(server: Any, **kwargs: Any) -> dict[str, Any]:
    """vLLM (and our engine): ``/v1/completions`` with ``prompt_logprobs=k`` and one new token."""
    top_k = max(1, int(kwargs.pop("top_k", kwargs.pop("top_logprobs", 1)) or 1))
    if kwargs.get("input_ids") is not None:
        prompt: Any = list(kwargs["input_ids"])
    elif kwargs.get("prompt") is not None:
        prompt = kwargs["prompt"]
    else:
        raise ValueError("get_logprobs needs prompt=<str> or input_ids=<list[int]>")
    body = {
        "model": kwargs.get("model"),
        "prompt": prompt,
        "max_tokens": 1,
        "temperature": 0.0,
        "prompt_logprobs": top_k,
        "return_token_ids": True,
    }
    data = await server._post(server._url("/completions"), body)
    choice = (data.get("choices") or [{}])[0]
    ids = choice.get("prompt_token_ids") or data.get("prompt_token_ids")
    rows = choice.get("prompt_logprobs") or data.get("prompt_logprobs")
    if ids is None or rows is None:
        raise InferenceError(f"{server.config.base_url} returned no prompt_logprobs")
    topk_ids: list[list[int]] = []
    topk_lps: list[list[float]] = []
    for row in rows[: len(ids)]:
        ranked = sorted((row or {}).items(), key=lambda kv: kv[1].get("rank") or 1 << 30)
        topk_ids.append([int(k) for k, _ in ranked])
        topk_lps.append([float(v["logprob"]) for _, v in ranked])
    return {
        "prompt_tokens": [int(t) for t in ids],
        "prompt_topk_token_ids": topk_ids,
        "prompt_topk_logprobs": topk_lps,
    }


__all__ = [
    "MISSING_LOGPROB",
    "token_logprobs",
    "LOGPROB_KEYS",
    "PromptLogprobsMixin",
    "vllm_prompt_logprobs",
]
