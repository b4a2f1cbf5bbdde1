"""The inference backends by name: the one place a backend is registered.

``BACKENDS`` maps each ``server_type`` (``APIServerConfig.server_type``, and the trainer's
``--inference-server``) to its class under ``backends/``. A new backend is one module there plus
one line here. ``ServerManager`` builds its servers through ``backend_class``; the trainer asks
``weight_routes`` how to put new weights into a server and, when it was not told which server runs
at a URL, ``probe_server_type`` (it asks in the order of ``BACKENDS``: most specific answer first).
The in-process ``--testing`` backend (``backends.scripted``) has no name: ``ServerManager`` builds
it itself.
"""

from __future__ import annotations

import httpx

from atroposlib.errors import ConfigError, InferenceError
from atroposlib.inference_clients.backend import APIServer
from atroposlib.inference_clients.backends.engine import EngineServer
from atroposlib.inference_clients.backends.openai import OpenAIServer
from atroposlib.inference_clients.backends.sglang import SGLangServer
from atroposlib.inference_clients.backends.trl_vllm import TrlVllmServer
from atroposlib.inference_clients.backends.vllm import VLLMServer
from atroposlib.inference_clients.weight_routes import WeightRoutes, get

BACKENDS: dict[str, type[APIServer]] = {
    "atropos": EngineServer,  # atroposlib's CPU engine (also reachable as "vllm")
    "sglang": SGLangServer,
    "vllm": VLLMServer,
    "trl": TrlVllmServer,
    "openai": OpenAIServer,
}


def server_types() -> list[str]:
    """Every registered ``server_type``."""
    return list(BACKENDS)


def backend_class(server_type: str) -> type[APIServer]:
    """The backend class of ``server_type``; ``ConfigError`` naming the known ones otherwise."""
    try:
        return BACKENDS[server_type]
    except KeyError:
        raise ConfigError(
            f"unknown server_type {server_type!r}; use one of {', '.join(BACKENDS)}"
        ) from None


def refreshable_server_types() -> list[str]:
    """The ``server_type`` names whose servers take new weights without a restart."""
    return [name for name, cls in BACKENDS.items() if cls.weight_routes is not None]


def weight_routes(server_type: str) -> WeightRoutes:
    """How to put new weights into a running server of ``server_type``."""
    routes = backend_class(server_type).weight_routes
    if routes is None:
        raise ConfigError(
            f"server_type {server_type!r} cannot load new weights while running; use one of "
            f"{', '.join(refreshable_server_types())} (or restart the server)"
        )
    return routes


def probe_server_type(http: httpx.Client, base: str) -> str:
    """Which refreshable server answers at ``base``: ``InferenceError`` if none answers at all,
    ``ConfigError`` if it is none of them."""
    health = get(http, base + "/health")
    if health is None:
        raise InferenceError(f"cannot reach inference server {base} (GET /health failed)")
    for name in refreshable_server_types():
        routes = BACKENDS[name].weight_routes
        if routes is not None and routes.identify(http, base, health):
            return name
    raise ConfigError(
        f"cannot tell which inference server runs at {base} (none of "
        f"{', '.join(refreshable_server_types())}); set --inference-server"
    )


__all__ = [
    "BACKENDS",
    "backend_class",
    "probe_server_type",
    "refreshable_server_types",
    "server_types",
    "weight_routes",
]
