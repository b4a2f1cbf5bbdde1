"""``create_app(model)``: the fake OpenAI-compatible server as a FastAPI app over a ``ScriptedModel``.

The shape is the trajectory API's: the model goes on ``app.state`` (routes reach it through
``deps.get_model``), the ``_Refused`` handler answers the errors a generation route gives instead
(``refusals.py``), and one router per concern comes from ``routes/``.
"""

from __future__ import annotations

from fastapi import FastAPI

from atroposlib.testing.fake_openai.refusals import install_refusal_handler
from atroposlib.testing.fake_openai.routes import chat, completions, health, models, sglang, weights
from atroposlib.testing.fake_openai.scripted_model import ScriptedModel


def create_app(model: ScriptedModel) -> FastAPI:
    """The app answering with ``model`` (its state and request log stay on ``model``)."""
    app = FastAPI()
    app.state.model = model
    install_refusal_handler(app)
    for module in (health, weights, models, completions, chat, sglang):
        app.include_router(module.router)
    return app


__all__ = ["create_app"]
