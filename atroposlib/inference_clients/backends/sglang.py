"""The ``sglang`` backend: OpenAI-compatible routes for text (as ``VLLMServer``), SGLang's native
``/generate`` for token ids and logprobs.

Weight refresh (``SGLangRoutes``): ``POST /update_weights_from_disk``; LoRA at ``/load_lora_adapter``
and ``/unload_lora_adapter`` (no ``/v1`` prefix), which cannot replace an adapter in place. An SGLang
server is recognised by ``GET /get_server_info``.
"""

from __future__ import annotations

from typing import Any, Optional, Union

import httpx

from atroposlib.inference_clients.backend import TokensAndLogprobs, api_root, read_version_route
from atroposlib.inference_clients.backends.vllm import VLLMServer
from atroposlib.inference_clients.generation_log import note_missing_logprobs
from atroposlib.inference_clients.logprobs import PromptLogprobsMixin, token_logprobs
from atroposlib.inference_clients.weight_routes import (
    DiskReloadRoutes,
    check_lora_answer,
    get,
    label_weights,
    post,
)
from atroposlib.inference_clients.weights_version import TokenResult, span_of_labels

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


class SGLangRoutes(DiskReloadRoutes):
    """SGLang's reload and LoRA routes (see the module docstring)."""

    def identify(self, http: httpx.Client, base: str, health: httpx.Response) -> bool:
        info = get(http, base + "/get_server_info")
        return info is not None and info.status_code == 200

    def load_lora(
        self,
        http: httpx.Client,
        base: str,
        name: str,
        path: str,
        replace: bool,
        version: Optional[int] = None,
    ) -> None:
        if replace:  # SGLang cannot load in place: unload first (a short window without the name)
            post(http, base + "/unload_lora_adapter", "lora", json={"lora_name": name})
        r = post(
            http,
            base + "/load_lora_adapter",
            "lora",
            json={"lora_name": name, "lora_path": path},
        )
        check_lora_answer(r, base, name)
        if version is not None:
            label_weights(http, base, version)


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
        outs, lps, reasons, spans = [], [], [], []
        missing = 0
        for res in results:
            meta = res.get("meta_info", {})
            triples = meta.get("output_token_logprobs") or []
            ids = res.get("output_ids") or [int(t[1]) for t in triples]
            outs.append(list(ids))
            lp, complete = token_logprobs([t[0] for t in triples], len(ids))
            missing += not complete
            lps.append(lp)
            fr = meta.get("finish_reason")
            reasons.append((fr.get("type") if isinstance(fr, dict) else fr) or "stop")
            # SGLang's update waits for requests in flight: one version made each answer
            spans.append(span_of_labels([meta.get("weight_version")]))
            if not prompt_tokens and meta.get("input_token_logprobs"):
                prompt_tokens = [int(t[1]) for t in meta["input_token_logprobs"]]
        note_missing_logprobs(missing)
        return TokenResult(prompt_tokens, outs, lps, reasons, spans)

    async def _read_weights_version(self) -> Optional[int]:
        """SGLang's ``GET /model_info`` (newer) or ``GET /get_weight_version`` (older)."""
        try:
            return await read_version_route(self, "/model_info", "weight_version")
        except LookupError:
            return await read_version_route(self, "/get_weight_version", "weight_version")


__all__ = ["SGLangRoutes", "SGLangServer"]
