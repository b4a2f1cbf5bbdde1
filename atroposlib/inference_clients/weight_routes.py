"""The weight-refresh side of a backend: the HTTP routes that put new weights into a running server.

Each backend whose server can take new weights without a restart names a ``WeightRoutes`` on its
class (``APIServer.weight_routes``); the trainer finds it through ``registry.weight_routes`` and never
needs to know which server speaks which protocol. The calls are synchronous (``httpx.Client``): the
trainer refreshes from its own thread, outside any event loop.

The helpers below are the routes more than one server shares: ``/update_weights_from_disk`` (our
engine and SGLang) and vLLM's ``/v1/load_lora_adapter`` with ``load_inplace`` (vLLM and our engine).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, Optional

import httpx

from atroposlib.errors import InferenceError


class WeightRoutes(ABC):
    """How to recognise one kind of server and load new weights into it."""

    @abstractmethod
    def identify(self, http: httpx.Client, base: str, health: httpx.Response) -> bool:
        """Whether the server at ``base`` (whose ``GET /health`` answered ``health``) is of this kind."""

    @abstractmethod
    def reload_from_disk(self, http: httpx.Client, base: str, path: str) -> Any:
        """Load the full checkpoint folder ``path`` into the server; return its weights version (or None)."""

    @abstractmethod
    def load_lora(self, http: httpx.Client, base: str, name: str, path: str, replace: bool) -> None:
        """Serve the adapter at ``path`` under ``name``; ``replace``: the name may already be loaded."""


def get(http: httpx.Client, url: str) -> Optional[httpx.Response]:
    """``GET url``, or None when nothing answers."""
    try:
        return http.get(url, timeout=10.0)
    except httpx.TransportError:
        return None


def post(http: httpx.Client, url: str, what: str, **kw: Any) -> httpx.Response:
    """``POST url``; an unreachable server is an ``InferenceError`` that starts with ``what``."""
    try:
        return http.post(url, **kw)
    except httpx.TransportError as e:
        raise InferenceError(f"{what}: cannot reach inference server {url}: {e!r}") from e


def json_body(r: httpx.Response) -> dict[str, Any]:
    """The answer's JSON object, or ``{}`` when it is not one."""
    try:
        body = r.json()
    except ValueError:
        return {}
    return body if isinstance(body, dict) else {}


def update_weights_from_disk(http: httpx.Client, base: str, path: str) -> Any:
    """``POST /update_weights_from_disk {"model_path"}`` (our engine, SGLang); the weights version back."""
    r = post(http, base + "/update_weights_from_disk", "reload", json={"model_path": path})
    if r.status_code == 404:
        raise InferenceError(
            f"reload: {base} has no /update_weights_from_disk endpoint; use --weight-refresh restart "
            "(or --inference-server vllm for a vLLM server)"
        )
    body = json_body(r)
    if r.status_code >= 400 or body.get("success") is False:
        raise InferenceError(f"reload: {base} refused the weights: {r.status_code} {r.text[:300]}")
    return body.get("weights_version")


def load_lora_in_place(http: httpx.Client, base: str, name: str, path: str) -> None:
    """vLLM's ``POST /v1/load_lora_adapter`` with ``load_inplace: true`` (vLLM, our engine)."""
    r = post(
        http,
        base + "/v1/load_lora_adapter",
        "lora",
        json={"lora_name": name, "lora_path": path, "load_inplace": True},
    )
    check_lora_answer(r, base, name)


def check_lora_answer(r: httpx.Response, base: str, name: str) -> None:
    """Raise ``InferenceError`` unless the server accepted adapter ``name``."""
    if r.status_code == 404:
        raise InferenceError(
            f"lora: {base} has no load_lora_adapter endpoint (vLLM needs --enable-lora and "
            "VLLM_ALLOW_RUNTIME_LORA_UPDATING=True; the CPU engine has it)"
        )
    if r.status_code >= 400 or json_body(r).get("success") is False:
        raise InferenceError(f"lora: {base} refused adapter {name}: {r.status_code} {r.text[:300]}")


__all__ = [
    "WeightRoutes",
    "check_lora_answer",
    "get",
    "json_body",
    "load_lora_in_place",
    "post",
    "update_weights_from_disk",
]
