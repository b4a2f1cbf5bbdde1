"""FastAPI dependencies of the proxy's routers: the app's ``ProxyState``."""

from __future__ import annotations

from fastapi import Request

from atroposlib.inference_clients.proxy.state import ProxyState


async def get_proxy(request: Request) -> ProxyState:
    """The shared state of this app (set by ``create_app``). A coroutine: a plain ``def``
    dependency would cost a thread hand-off per request."""
    proxy: ProxyState = request.app.state.proxy
    return proxy


__all__ = ["get_proxy"]
