"""FastAPI dependencies of the ``serve-openenv`` routers: the app's ``ServedEnv``."""

from __future__ import annotations

from starlette.requests import HTTPConnection

from atroposlib.interop.openenv.serve_state import ServedEnv


async def get_served_env(connection: HTTPConnection) -> ServedEnv:
    """The served env of this app (set by ``create_openenv_app``), for HTTP routes and the
    WebSocket alike. A coroutine: a plain ``def`` dependency would cost a thread hand-off."""
    served: ServedEnv = connection.app.state.served_env
    return served


__all__ = ["get_served_env"]
