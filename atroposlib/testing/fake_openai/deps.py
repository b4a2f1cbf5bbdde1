"""FastAPI dependencies of the fake server's routers: the app's ``ScriptedModel``."""

from __future__ import annotations

from fastapi import Request

from atroposlib.testing.fake_openai.scripted_model import ScriptedModel


async def get_model(request: Request) -> ScriptedModel:
    """The scripted model this app answers with (set by ``create_app``)."""
    model: ScriptedModel = request.app.state.model
    return model


__all__ = ["get_model"]
