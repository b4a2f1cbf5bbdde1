"""The ``atropos`` backend: atroposlib's own CPU engine (``atroposlib.inference``, ``atropos-serve-model``).

It speaks vLLM's protocol (``return_token_ids``, ``prompt_logprobs``, the LoRA routes), so the client
is ``VLLMServer``'s; a config may also name it ``vllm``. What differs is how it takes new weights
(``EngineRoutes``): ``POST /update_weights_from_disk`` (which answers the new ``weights_version``) and
vLLM's ``/v1/load_lora_adapter`` with ``load_inplace``. It is recognised by its ``GET /health``,
which reports ``weights_version``.
"""

from __future__ import annotations

from typing import Optional

import httpx

from atroposlib.inference_clients.backends.vllm import VLLMServer
from atroposlib.inference_clients.weight_routes import (
    DiskReloadRoutes,
    json_body,
    load_lora_in_place,
)


class EngineRoutes(DiskReloadRoutes):
    """Our engine's reload and LoRA routes (see the module docstring)."""

    def identify(self, http: httpx.Client, base: str, health: httpx.Response) -> bool:
        return health.status_code == 200 and "weights_version" in json_body(health)

    def load_lora(
        self,
        http: httpx.Client,
        base: str,
        name: str,
        path: str,
        replace: bool,
        version: Optional[int] = None,
    ) -> None:
        load_lora_in_place(http, base, name, path, version)  # labelled as it is swapped in


class EngineServer(VLLMServer):
    """atroposlib's CPU engine (``server_type: atropos``)."""

    weight_routes = EngineRoutes()


__all__ = ["EngineRoutes", "EngineServer"]
