"""Prompt logprobs (Atropos's ``get_logprobs``), normalised to one schema for every backend.

``{"prompt_tokens": [ids], "prompt_topk_token_ids": [[ids]], "prompt_topk_logprobs": [[floats]]}``:
one row per prompt token, best alternative first. The first prompt token has no logprob (nothing
precedes it); its row holds the token itself with logprob 0.0, so rows stay aligned with tokens.
"""

from __future__ import annotations

from typing import Any

from atroposlib.errors import InferenceError

LOGPROB_KEYS = ("prompt_tokens", "prompt_topk_token_ids", "prompt_topk_logprobs")


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
    for tid, row in zip(ids, rows, strict=False):
        if not row:
            topk_ids.append([int(tid)])
            topk_lps.append([0.0])
            continue
        ranked = sorted(row.items(), key=lambda kv: kv[1].get("rank") or 1 << 30)
        best = [(int(k), float(v["logprob"])) for k, v in ranked if int(k) != int(tid)][: top_k - 1]
        own = float(row[str(tid)]["logprob"]) if str(tid) in row else float("-inf")
        pairs = sorted([(int(tid), own), *best], key=lambda p: -p[1])[:top_k]
        topk_ids.append([p[0] for p in pairs])
        topk_lps.append([p[1] for p in pairs])
    return {
        "prompt_tokens": [int(t) for t in ids],
        "prompt_topk_token_ids": topk_ids,
        "prompt_topk_logprobs": topk_lps,
    }


__all__ = ["LOGPROB_KEYS", "PromptLogprobsMixin", "vllm_prompt_logprobs"]
