"""The ``sglang`` backend: OpenAI-compatible routes for text (as ``VLLMServer``), SGLang's native
``/generate`` for token ids and logprobs.

Weight refresh (``SGLangRoutes``): ``POST /update_weights_from_disk``; LoRA at ``/load_lora_adapter``
and ``/unload_lora_adapter`` (no ``/v1`` prefix), which cannot replace an adapter in place. An SGLang
server is recognised by ``GET /get_server_info``.
"""

from __future__ import annotations

from typing import Any, Union

import httpx

from atroposlib.inference_clients.backend import TokensAndLogprobs, api_root
from atroposlib.inference_clients.backends.vllm import VLLMServer
from atroposlib.inference_clients.logprobs import PromptLogprobsMixin
from atroposlib.inference_clients.weight_routes import (
    WeightRoutes,
    check_lora_answer,
    get,
    post,
    update_weights_from_disk,
)

_SGLANG_SAMPLING = {
    "max_tokens": "max_new_tokens",
    "temperature": "temperature",
    "top_p": "top_p",
    "top_k": "top_k",
    "stop": "stop",
    "seed": "sampling_seed",
    "min_p": "min_p",
    "frequency_penalty": "frequency_penalty",
    "presence_penalty": "presence_penalty",
}


class SGLangRoutes(WeightRoutes):
    """SGLang's reload and LoRA routes (see the module docstring)."""

    def identify(self, http: httpx.Client, base: str, health: httpx.Response) -> bool:
        info = get(http, base + "/get_server_info")
        return info is not None and info.status_code == 200

    def reload_from_disk(self, http: httpx.Client, base: str, path: str) -> Any:
        return update_weights_from_disk(http, base, path)

    def load_lora(self, http: httpx.Client, base: str, name: str, path: str, replace: bool) -> None:
        if replace:  # SGLang cannot load in place: unload first (a short window without the name)
            post(http, base + "/unload_lora_adapter", "lora", json={"lora_name": name})
        r = post(
            http,
            base + "/load_lora_adapter",
            "lora",
            json={"lora_name": name, "lora_path": path},
        )
        check_lora_answer(r, base, name)


class SGLangServer(VLLMServer):
    """SGLang: OpenAI-compatible routes for text, native ``/generate`` for tokens and logprobs."""

    weight_routes = SGLangRoutes()

    _get_logprobs_wrapper = PromptLogprobsMixin._get_logprobs_wrapper  # no prompt scoring

    async def _request_tokens(self, kwargs: dict[str, Any]) -> TokensAndLogprobs:
        n = int(kwargs.get("n", 1) or 1)
        sampling = {
            dst: kwargs[src] for src, dst in _SGLANG_SAMPLING.items() if kwargs.get(src) is not None
        }
        prompt: Union[str, list[int], None] = kwargs.get("input_ids", kwargs.get("prompt"))
        body: dict[str, Any] = {"sampling_params": sampling, "return_logprob": True}
        if isinstance(prompt, list):
            body["input_ids"] = [list(prompt) for _ in range(n)] if n > 1 else list(prompt)
        else:
            body["text"] = [prompt] * n if n > 1 else prompt
        data = await self._post(f"{api_root(self.config.base_url or '')}/generate", body)
        results = data if isinstance(data, list) else [data]
        prompt_tokens: list[int] = list(prompt) if isinstance(prompt, list) else []
        outs, lps, reasons = [], [], []
        for res in results:
            meta = res.get("meta_info", {})
            triples = meta.get("output_token_logprobs") or []
            ids = res.get("output_ids") or [int(t[1]) for t in triples]
            outs.append(list(ids))
            lp = [float(t[0]) if t[0] is not None else 0.0 for t in triples][: len(ids)]
            lps.append(lp + [0.0] * (len(ids) - len(lp)))
            fr = meta.get("finish_reason")
            reasons.append((fr.get("type") if isinstance(fr, dict) else fr) or "stop")
            if not prompt_tokens and meta.get("input_token_logprobs"):
                prompt_tokens = [int(t[1]) for t in meta["input_token_logprobs"]]
        return prompt_tokens, outs, lps, reasons


__all__ = ["SGLangRoutes", "SGLangServer"]
