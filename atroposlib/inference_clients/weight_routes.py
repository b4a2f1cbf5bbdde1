"""The weight-refresh side of a backend: the HTTP routes that put new weights into a running server.

Each backend whose server can take new weights without a restart names a ``WeightRoutes`` on its
class (``APIServer.weight_routes``); the trainer finds it through ``registry.weight_routes`` and never
needs to know which server speaks which protocol. The calls are synchronous (``httpx.Client``): the
trainer refreshes from its own thread, outside any event loop.

The helpers below are the routes more than one server shares: ``/update_weights_from_disk`` (our
engine and SGLang, whose routes both derive from ``DiskReloadRoutes``) and vLLM's ``/v1/load_lora_adapter`` with ``load_inplace`` (vLLM and our engine).

Every load names the ``version`` of the weights (the trainer step): the server labels what it serves
with it and reports it with every completion or on request (``weights_version``), which is how a
sequence carries the version that really generated it. ``/update_weights_from_disk`` takes it as
``weight_version`` (SGLang's name); otherwise ``label_weights`` sets it with
``POST /update_weight_version`` (vLLM dev mode, SGLang, our engine).
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
    def reload_from_disk(
        self, http: httpx.Client, base: str, path: str, version: Optional[int] = None
    ) -> Any:
        """Load the full checkpoint folder ``path`` into the server, labelled ``version``; return
        the weights version the server reports (or None)."""

    @abstractmethod
    def load_lora(
        self,
        http: httpx.Client,
        base: str,
        name: str,
        path: str,
        replace: bool,
        version: Optional[int] = None,
    ) -> None:
        """Serve the adapter at ``path`` under ``name``, labelled ``version``; ``replace``: the name
        may already be loaded."""

    def label(self, http: httpx.Client, base: str, version: int) -> bool:
        """Label the weights the server holds now (after a restart); False when it cannot."""
        return label_weights(http, base, version)


class DiskReloadRoutes(WeightRoutes):
    """A server that takes a full checkpoint at ``POST /update_weights_from_disk`` (our engine,
    SGLang); subclasses say how to recognise it and how it loads a LoRA."""

    def reload_from_disk(
        self, http: httpx.Client, base: str, path: str, version: Optional[int] = None
    ) -> Any:
        return update_weights_from_disk(http, base, path, version)


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


def label_weights(http: httpx.Client, base: str, version: int) -> bool:
    """``POST /update_weight_version {"new_version"}``; False when the server has no such route
    (vLLM outside dev mode): its completions then carry no version."""
    r = post(http, base + "/update_weight_version", "label", json={"new_version": str(version)})
    if r.status_code in (404, 405):
        return False
    if r.status_code >= 400:
        raise InferenceError(
            f"label: {base} refused version {version}: {r.status_code} {r.text[:300]}"
        )
    return True


def update_weights_from_disk(
    http: httpx.Client, base: str, path: str, version: Optional[int] = None
) -> Any:
    """``POST /update_weights_from_disk {"model_path", "weight_version"}`` (our engine, SGLang); the
    weights version back."""
    body: dict[str, Any] = {"model_path": path}
    if version is not None:
        body["weight_version"] = str(version)
    r = post(http, base + "/update_weights_from_disk", "reload", json=body)
    if r.status_code == 404:
        raise InferenceError(
            f"reload: {base} has no /update_weights_from_disk endpoint; use --weight-refresh restart "
            "(or --inference-server vllm for a vLLM server)"
        )
    body = json_body(r)
    if r.status_code >= 400 or body.get("success") is False:
        raise InferenceError(f"reload: {base} refused the weights: {r.status_code} {r.text[:300]}")
    return body.get("weights_version")


def load_lora_in_place(
    http: httpx.Client, base: str, name: str, path: str, version: Optional[int] = None
) -> None:
    """vLLM's ``POST /v1/load_lora_adapter`` with ``load_inplace: true`` (vLLM, our engine);
    ``version``: our engine's ``weight_version`` (labelled as the adapter is swapped in)."""
    body: dict[str, Any] = {"lora_name": name, "lora_path": path, "load_inplace": True}
    if version is not None:
        body["weight_version"] = str(version)
    r = post(http, base + "/v1/load_lora_adapter", "lora", json=body)
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
    "DiskReloadRoutes",
    "WeightRoutes",
    "check_lora_answer",
    "get",
    "json_body",
    "label_weights",
    "load_lora_in_place",
    "post",
    "update_weights_from_disk",
]
