"""``create_openenv_app(env)``: an Atropos env served as an OpenEnv environment (a FastAPI app).

The shape is the trajectory API's (``atroposlib.api.app``): this factory puts the app's shared state
(``serve_state.ServedEnv``: the env, the session cap, the action field, the seeds' items) on
``app.state``, where the routes reach it through ``serve_deps.get_served_env``, and includes one
router per concern from ``serve_routes/``: ``info`` (``GET /health``, ``/metadata``, ``/schema``, as
openenv's answer) and ``session`` (openenv's WebSocket protocol on ``/ws``: each connection is one
session with its own episodes; beyond ``max_sessions`` a new one gets ``CAPACITY_REACHED``).

``reset`` with an integer ``seed`` pins the item: the first reset with a seed takes the env's next item,
later resets with the same seed (a GRPO group's episodes) get that same item (the last ``SEEDS_KEPT``
seeds are remembered); without a seed every reset takes the next item. Each finished episode is one
INFO log line (``episode done: ...``).
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI

from atroposlib.interop.openenv.serve_routes import info, session
from atroposlib.interop.openenv.serve_state import SEEDS_KEPT, ServedEnv


def create_openenv_app(env: Any, max_sessions: int = 8, action_field: str = "message") -> FastAPI:
    """The app serving ``env`` (set up already, ``group_size`` 1) to OpenEnv clients."""
    app = FastAPI(title=f"{type(env).__name__} as an OpenEnv environment")
    app.state.served_env = ServedEnv(env, max_sessions, action_field)
    for module in (info, session):
        app.include_router(module.router)
    return app


__all__ = ["SEEDS_KEPT", "create_openenv_app"]
