"""``create_app(config)``: the CPU inference engine as a FastAPI app (OpenAI-compatible completions
and chat, streaming, weight reload and LoRA adapters, health and metrics).

The shape is the trajectory API's: this factory loads the model (``ModelLoadError`` for a bad
directory), puts the shared ``ServedModel`` on ``app.state`` (routes reach it through
``deps.get_served``), and includes one router per concern from ``routes/``. The generation worker
starts on startup and stops on shutdown. Errors are OpenAI-shaped (``http.py``).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Optional

from fastapi import FastAPI

from atroposlib.inference.config import EngineConfig
from atroposlib.inference.engine import InferenceEngine
from atroposlib.inference.http import BadRequest, install_error_handlers
from atroposlib.inference.routes import generation, observability, weights
from atroposlib.inference.served import ServedModel


def create_app(config: EngineConfig, engine: Optional[InferenceEngine] = None) -> FastAPI:
    """Build the app; loads the model now (raises ``ModelLoadError``) unless ``engine`` is given."""
    eng = engine or InferenceEngine(config)
    served = ServedModel(config, eng)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        eng.start()
        yield
        await asyncio.get_running_loop().run_in_executor(None, eng.stop)

    app = FastAPI(title="atroposlib CPU inference engine", lifespan=lifespan)
    app.state.engine = eng
    app.state.served = served
    observability.install_request_counter(app, served)
    install_error_handlers(app)
    for module in (generation, weights, observability):
        app.include_router(module.router)
    return app


__all__ = ["BadRequest", "create_app"]
