"""The HTTP routes that put new weights into each kind of inference server, and how to tell them apart.

Three servers, three protocols:

* ``atropos`` (our CPU engine): ``POST /update_weights_from_disk`` and vLLM's LoRA routes.
* ``vllm``: full weights in place through its development routes (``VLLM_SERVER_DEV_MODE=1``):
  ``/pause?mode=wait`` (requests in flight finish on the old weights, new ones queue), ``/collective_rpc``
  calling atroposlib's worker extension (``atropos_reload_weights``, which also repacks the CPU build's
  tied LM head that vLLM's own ``reload_weights`` leaves stale), ``/reset_prefix_cache`` (cached KV came
  from the old weights) and ``/resume``. LoRA: ``/v1/load_lora_adapter`` with ``load_inplace: true``.
* ``sglang``: ``POST /update_weights_from_disk``; LoRA at ``/load_lora_adapter`` and
  ``/unload_lora_adapter`` (no ``/v1`` prefix), which cannot replace an adapter in place.

``probe_server_kind`` tells them apart by what they answer: our engine's ``/health`` reports
``weights_version``, SGLang has ``/get_server_info``, vLLM has ``/version``.
"""

from __future__ import annotations

from typing import Any, Literal, Optional

import httpx

from atroposlib.errors import ConfigError, InferenceError
from atroposlib.inference.vllm_plugin import EXTENSION_CLASS, RELOAD_METHOD

ServerKind = Literal["atropos", "vllm", "sglang"]


def _get(http: httpx.Client, url: str) -> Optional[httpx.Response]:
    try:
        return http.get(url, timeout=10.0)
    except httpx.TransportError:
        return None


def probe_server_kind(http: httpx.Client, base: str) -> ServerKind:
    """Which server answers at ``base``; ``InferenceError`` if none does, ``ConfigError`` if unknown."""
    health = _get(http, base + "/health")
    if health is None:
        raise InferenceError(f"cannot reach inference server {base} (GET /health failed)")
    if health.status_code == 200 and "weights_version" in _json(health):
        return "atropos"
    info = _get(http, base + "/get_server_info")
    if info is not None and info.status_code == 200:
        return "sglang"
    version = _get(http, base + "/version")
    if version is not None and version.status_code == 200 and "version" in _json(version):
        return "vllm"
    raise ConfigError(
        f"cannot tell which inference server runs at {base} (not atroposlib's engine, SGLang or "
        "vLLM); set --inference-server"
    )


def _json(r: httpx.Response) -> dict[str, Any]:
    try:
        body = r.json()
    except ValueError:
        return {}
    return body if isinstance(body, dict) else {}


def _post(http: httpx.Client, url: str, what: str, **kw: Any) -> httpx.Response:
    try:
        return http.post(url, **kw)
    except httpx.TransportError as e:
        raise InferenceError(f"{what}: cannot reach inference server {url}: {e!r}") from e


def reload_from_disk(http: httpx.Client, base: str, kind: ServerKind, path: str) -> Any:
    """Load the full checkpoint folder ``path`` into the running server; return its weights version."""
    if kind == "vllm":
        return _vllm_reload(http, base, path)
    r = _post(http, base + "/update_weights_from_disk", "reload", json={"model_path": path})
    if r.status_code == 404:
        raise InferenceError(
            f"reload: {base} has no /update_weights_from_disk endpoint; use --weight-refresh restart "
            "(or --inference-server vllm for a vLLM server)"
        )
    body = _json(r)
    if r.status_code >= 400 or body.get("success") is False:
        raise InferenceError(f"reload: {base} refused the weights: {r.status_code} {r.text[:300]}")
    return body.get("weights_version")


def _vllm_reload(http: httpx.Client, base: str, path: str) -> Any:
    r = _post(http, base + "/pause", "reload", params={"mode": "wait"})
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
        r = _post(
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
        cache = _post(http, base + "/reset_prefix_cache", "reload")
        if cache.status_code >= 400:
            raise InferenceError(
                f"reload: vLLM at {base} could not reset its prefix cache: {cache.status_code}"
            )
    finally:
        _post(http, base + "/resume", "reload")
    return None  # vLLM keeps no weights version; the trainer's policy version says which step


def load_lora(
    http: httpx.Client, base: str, kind: ServerKind, name: str, path: str, replace: bool
) -> None:
    """Serve the adapter at ``path`` under ``name``; ``replace``: the name may already be loaded."""
    if kind == "sglang":
        if replace:  # SGLang cannot load in place: unload first (a short window without the name)
            _post(http, base + "/unload_lora_adapter", "lora", json={"lora_name": name})
        r = _post(
            http,
            base + "/load_lora_adapter",
            "lora",
            json={"lora_name": name, "lora_path": path},
        )
    else:
        r = _post(
            http,
            base + "/v1/load_lora_adapter",
            "lora",
            json={"lora_name": name, "lora_path": path, "load_inplace": True},
        )
    if r.status_code == 404:
        raise InferenceError(
            f"lora: {base} has no load_lora_adapter endpoint (vLLM needs --enable-lora and "
            "VLLM_ALLOW_RUNTIME_LORA_UPDATING=True; the CPU engine has it)"
        )
    if r.status_code >= 400 or _json(r).get("success") is False:
        raise InferenceError(f"lora: {base} refused adapter {name}: {r.status_code} {r.text[:300]}")


__all__ = ["ServerKind", "load_lora", "probe_server_kind", "reload_from_disk"]
