"""Atropos import path: server configs and the backend interface (code in ``atroposlib.inference_clients``)."""

from atroposlib.inference_clients.backend import APIServer
from atroposlib.inference_clients.config import APIServerConfig, ReasoningConfig, ServerBaseline
from atroposlib.inference_clients.limits import AsyncSemWithAdaptiveWeight

__all__ = [
    "APIServer",
    "APIServerConfig",
    "AsyncSemWithAdaptiveWeight",
    "ReasoningConfig",
    "ServerBaseline",
]
