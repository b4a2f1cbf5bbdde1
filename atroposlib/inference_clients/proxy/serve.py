"""What ``atropos-proxy`` builds from its settings: the backend's model (asked of its ``/v1/models``:
the served name when none is given, and its context length), the tokenizer, the server manager and
the app. Each thing that cannot be had is one ``ConfigError`` line (a backend that never answers,
a model it does not serve, a tokenizer that does not load)."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Optional

import httpx
from fastapi import FastAPI

from atroposlib.errors import AtroposError, ConfigError
from atroposlib.inference_clients.config import APIServerConfig
from atroposlib.inference_clients.proxy.app import create_app
from atroposlib.inference_clients.proxy.settings import ProxySettings
from atroposlib.inference_clients.server_manager import ServerManager
from atroposlib.utils.tokenizer_loading import load_tokenizer


@dataclass
class BackendModel:
    """The model a backend serves, as its ``/v1/models`` lists it."""

    name: str
    max_model_len: Optional[int]


def _models_url(base_url: str) -> str:
    base = base_url.rstrip("/")
    return (base if base.endswith("/v1") else base + "/v1") + "/models"


def backend_model(
    base_url: str, wanted: Optional[str], api_key: Optional[str], wait_s: float
) -> BackendModel:
    """The model ``wanted`` (default: the first listed) at ``base_url``, waiting up to ``wait_s``
    seconds for the backend to answer."""
    url = _models_url(base_url)
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    deadline = time.monotonic() + wait_s
    last = "no answer"
    while True:
        try:
            r = httpx.get(url, headers=headers, timeout=10.0)
            if r.status_code == 200:
                break
            last = f"{r.status_code} {r.text[:200]}"
            if r.status_code in (401, 403):
                raise ConfigError(f"{url} refused the key: {last} (check --backend-api-key)")
        except httpx.HTTPError as e:
            last = repr(e)
        if time.monotonic() >= deadline:
            raise ConfigError(
                f"the backend at {base_url} did not answer {url} within {wait_s:g} s ({last})"
            )
        time.sleep(1.0)
    cards = [c for c in (r.json().get("data") or []) if isinstance(c, dict)]
    names = [str(c.get("id")) for c in cards]
    chosen = next((c for c in cards if wanted is None or c.get("id") == wanted), None)
    if chosen is None:
        raise ConfigError(
            f"the backend at {base_url} serves {names}, not {wanted!r} (--model-name)"
        )
    length = chosen.get("max_model_len")
    return BackendModel(str(chosen["id"]), int(length) if isinstance(length, int) else None)


def build_proxy(
    settings: ProxySettings, backend_wait_s: float = 60.0
) -> tuple[FastAPI, BackendModel]:
    """The proxy app of ``settings`` and the model it serves (``ConfigError`` for what is wrong)."""
    if not settings.base_url:
        raise ConfigError("--base-url is required (the inference server, http://host:port/v1)")
    model = backend_model(
        settings.base_url[0], settings.model_name, settings.backend_api_key, backend_wait_s
    )
    try:
        tokenizer: Any = load_tokenizer(settings.tokenizer or model.name, hint="set --tokenizer")
    except AtroposError as e:
        raise ConfigError(str(e)) from None
    configs = [
        APIServerConfig(
            base_url=url,
            model_name=model.name,
            server_type=settings.server_type,
            api_key=settings.backend_api_key or "",
        )
        for url in settings.base_url
    ]
    manager = ServerManager(configs, on_token_drift=settings.on_token_drift)
    return create_app(manager, tokenizer, model.name, settings, model.max_model_len), model


__all__ = ["BackendModel", "backend_model", "build_proxy"]
