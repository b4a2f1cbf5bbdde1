"""The ``vllm`` backend: vLLM's OpenAI-compatible server, token ids through ``return_token_ids``.

Clients: ``/v1/chat/completions`` and ``/v1/completions`` for text, ``/v1/completions`` with
``return_token_ids`` and ``logprobs`` for tokens, ``prompt_logprobs`` for ``get_logprobs``.

Weight refresh (``VLLMRoutes``): full weights in place through vLLM's development routes
(``VLLM_SERVER_DEV_MODE=1``): ``/pause?mode=keep`` (requests in flight are frozen where they are, not
waited for: generation does not drain at a refresh), ``/collective_rpc`` calling atroposlib's worker
extension (``atropos_reload_weights``, which also repacks the CPU build's tied LM head that vLLM's own
``reload_weights`` leaves stale), ``/reset_prefix_cache?reset_running_requests=true`` (cached KV came
from the old weights: the frozen requests give theirs up and are resumed from the tokens they already
generated, recomputed with the new weights), ``/update_weight_version`` (the trainer's step: vLLM
then reports it at ``/weight_info``, which the client reads around its requests, so a sequence
generated across the refresh says both versions) and ``/resume``. ``PAUSE_MODE = "wait"`` restores
the draining refresh (requests in flight finish on the old weights first). LoRA: ``/v1/load_lora_adapter`` with ``load_inplace: true``, then
``/update_weight_version``. vLLM keeps ``load_inplace`` on the adapter it serves and then re-reads it
from disk at every model step (vLLM issue 33791); atroposlib's worker extension stops that, and the
first LoRA load on a server asks it (``/collective_rpc atropos_lora_loads_once``) and warns once,
with the fix, when the server does not have it. A vLLM server is recognised by ``GET /version``.
"""

from __future__ import annotations

import logging
from typing import Any, ClassVar, Optional
from urllib.parse import urlsplit

import httpx
from openai.types.chat.chat_completion import ChatCompletion
from openai.types.completion import Completion

from atroposlib.errors import InferenceError
from atroposlib.inference.vllm_plugin import EXTENSION_CLASS, LORA_ONCE_METHOD, RELOAD_METHOD
from atroposlib.inference_clients.answers import to_openai
from atroposlib.inference_clients.backend import APIServer, TokensAndLogprobs, read_version_route
from atroposlib.inference_clients.generation_log import note_missing_logprobs
from atroposlib.inference_clients.logprobs import token_logprobs, vllm_prompt_logprobs
from atroposlib.inference_clients.weight_routes import (
    WeightRoutes,
    get,
    json_body,
    label_weights,
    load_lora_in_place,
    post,
)
from atroposlib.inference_clients.weights_version import TokenResult, span_from_stamps

logger = logging.getLogger(__name__)


class VLLMRoutes(WeightRoutes):
    """vLLM's dev-mode reload routes and its in-place LoRA route (see the module docstring)."""

    PAUSE_MODE = "keep"  # "wait": requests in flight finish on the old weights (generation drains)

    def __init__(self) -> None:
        self._lora_checked: set[str] = set()  # servers already asked whether a load happens once

    def identify(self, http: httpx.Client, base: str, health: httpx.Response) -> bool:
        version = get(http, base + "/version")
        return (
            version is not None and version.status_code == 200 and "version" in json_body(version)
        )

    def reload_from_disk(
        self, http: httpx.Client, base: str, path: str, version: Optional[int] = None
    ) -> Any:
        r = post(http, base + "/pause", "reload", params={"mode": self.PAUSE_MODE})
        if r.status_code == 404:
            raise InferenceError(
                f"reload: vLLM at {base} has no /pause route: start it with VLLM_SERVER_DEV_MODE=1 and "
                f"--worker-extension-cls {EXTENSION_CLASS} (see docs/inference.md)"
            )
        if r.status_code >= 400:
            raise InferenceError(
                f"reload: vLLM at {base} refused /pause: {r.status_code} {r.text[:300]}"
            )
        try:
            r = post(
                http,
                base + "/collective_rpc",
                "reload",
                json={"method": RELOAD_METHOD, "kwargs": {"weights_path": path}},
            )
            if r.status_code >= 400:
                hint = (
                    f"; start vLLM with --worker-extension-cls {EXTENSION_CLASS} and the extension's "
                    "folder on PYTHONPATH (atroposlib.inference.vllm_plugin.extension_dir())"
                    if "not implemented" in r.text.lower()
                    else ""
                )
                raise InferenceError(
                    f"reload: vLLM at {base} failed to load {path}: {r.status_code} {r.text[:300]}{hint}"
                )
            keep = self.PAUSE_MODE == "keep"  # frozen requests hold KV of the old weights
            cache = post(
                http,
                base + "/reset_prefix_cache",
                "reload",
                params={"reset_running_requests": "true" if keep else "false"},
            )
            if cache.status_code >= 400 or json_body(cache).get("success") is False:
                raise InferenceError(
                    f"reload: vLLM at {base} could not reset its prefix cache: {cache.status_code} "
                    f"{cache.text[:200]}"
                )
            if version is not None:  # labelled while paused: no token of the new weights unlabelled
                label_weights(http, base, version)
        finally:
            post(http, base + "/resume", "reload")
        return version

    def load_lora(
        self,
        http: httpx.Client,
        base: str,
        name: str,
        path: str,
        replace: bool,
        version: Optional[int] = None,
    ) -> None:
        if base not in self._lora_checked:
            loads_once = lora_loads_once(http, base)  # an unreachable server raises: asked again
            self._lora_checked.add(base)
            if not loads_once:
                logger.warning(
                    "lora: vLLM at %s lacks atroposlib's worker extension: after an in-place load it "
                    "re-reads adapter %s from disk at every model step (vLLM issue 33791), and its CPU "
                    "build's LoRA kernels copy the adapter once per token; start it with "
                    "VLLM_SERVER_DEV_MODE=1, --worker-extension-cls %s and the extension's folder on "
                    "PYTHONPATH (atroposlib.inference.vllm_plugin.extension_dir()); atropos-launch does",
                    base,
                    name,
                    EXTENSION_CLASS,
                )
        load_lora_in_place(http, base, name, path)
        if version is not None:
            label_weights(http, base, version)


def lora_loads_once(http: httpx.Client, base: str) -> bool:
    """Whether every worker of the vLLM at ``base`` has atroposlib's fix for in-place LoRA loads."""
    r = post(http, base + "/collective_rpc", "lora", json={"method": LORA_ONCE_METHOD})
    if r.status_code != 200:
        return False
    results = json_body(r).get("results")
    # vLLM's route sends back a worker's non-container result as its str()
    return isinstance(results, list) and bool(results) and all(str(x) == "True" for x in results)


class VLLMServer(APIServer):
    """vLLM's OpenAI-compatible server (and our CPU engine): token ids via ``return_token_ids``."""

    supports_tokens = True
    weight_routes: ClassVar[Optional[WeightRoutes]] = VLLMRoutes()

    def _url(self, path: str) -> str:
        base = (self.config.base_url or "").rstrip("/")
        if base and urlsplit(base).path in ("", "/"):
            base += "/v1"  # a bare server root means its OpenAI-compatible routes
        return f"{base}{path}"

    async def _request_chat(self, kwargs: dict[str, Any]) -> ChatCompletion:
        return to_openai(ChatCompletion, await self._post(self._url("/chat/completions"), kwargs))

    async def _request_completion(self, kwargs: dict[str, Any]) -> Completion:
        return to_openai(Completion, await self._post(self._url("/completions"), kwargs))

    async def _get_logprobs_wrapper(self, **kwargs: Any) -> dict[str, Any]:
        return await vllm_prompt_logprobs(self, **kwargs)

    async def _request_tokens(self, kwargs: dict[str, Any]) -> TokensAndLogprobs:
        body = {k: v for k, v in kwargs.items() if k != "input_ids"}
        if "input_ids" in kwargs:
            body["prompt"] = kwargs["input_ids"]
        body["logprobs"] = 1 if body.get("logprobs") in (None, True, 0) else body["logprobs"]
        body["return_token_ids"] = True
        data = await self._post(self._url("/completions"), body)
        prompt_tokens = data.get("prompt_token_ids")
        outs, lps, reasons, spans = [], [], [], []
        missing = 0
        for ch in sorted(data.get("choices", []), key=lambda c: c.get("index", 0)):
            if prompt_tokens is None:
                prompt_tokens = ch.get("prompt_token_ids")
            ids = ch.get("token_ids")
            if ids is None:
                raise InferenceError(
                    f"{self.config.base_url} returned no token_ids; it does not support return_token_ids "
                    "(vLLM >= 0.10.2 does); use server_type openai for text-only servers"
                )
            lp, complete = token_logprobs(
                (ch.get("logprobs") or {}).get("token_logprobs"), len(ids)
            )
            missing += not complete
            outs.append(list(ids))
            lps.append(lp)
            reasons.append(ch.get("finish_reason") or "stop")
            spans.append(span_from_stamps(ch.get("weight_versions")))
        if prompt_tokens is None:
            raise InferenceError(f"{self.config.base_url} returned no prompt_token_ids")
        note_missing_logprobs(missing)
        return TokenResult(list(prompt_tokens), outs, lps, reasons, spans)

    async def _read_weights_version(self) -> Optional[int]:
        """vLLM's dev-mode ``GET /weight_info`` (our engine answers it too)."""
        return await read_version_route(self, "/weight_info", "weight_version")


__all__ = ["VLLMRoutes", "VLLMServer", "lora_loads_once"]
