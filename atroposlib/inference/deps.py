"""FastAPI dependencies of the engine's routers: the app's ``ServedModel``."""

from __future__ import annotations

from fastapi import Request

from atroposlib.inference.served import ServedModel


async def get_served(request: Request) -> ServedModel:
    """The served model of this app (set by ``create_app``). A coroutine: a plain ``def``
    dependency would cost a thread hand-off per request."""
    served: ServedModel = request.app.state.served
    return served


__all__ = ["get_served"]
