"""``create_app(config)``: the CPU inference engine as a FastAPI app (OpenAI-compatible completions
and chat, streaming, weight reload and LoRA adapters, health and metrics).

The shape is the trajectory API's: this factory loads the model (``ModelLoadError`` for a bad
directory), puts the shared ``ServedModel`` on ``app.state`` (routes reach it through
``deps.get_served``), and includes one router per concern from ``routes/``. The generation worker
starts on startup and stops on shutdown, with the summary line of ``activity.py`` (in place of a
log line per request). Errors are OpenAI-shaped (``http.py``), a fault included (the
``FaultBarrier`` answers it once, logged once, and keeps the connection); the schema says so
(``openapi.py``: 400s, not 422s). With ``config.api_key`` every route but ``/health`` wants it
(``http.require_api_key``) and the schema declares the bearer scheme.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Optional

from fastapi import Depends, FastAPI

from atroposlib.inference.activity import EngineActivity
from atroposlib.inference.config import EngineConfig
from atroposlib.inference.engine import InferenceEngine
from atroposlib.inference.http import (
    BadRequest,
    fault_body,
    install_error_handlers,
    require_api_key,
)
from atroposlib.inference.openapi import errors, install_openapi
from atroposlib.inference.routes import generation, observability, weights
from atroposlib.inference.served import ServedModel
from atroposlib.utils.fault_barrier import FaultBarrier

logger = logging.getLogger("atroposlib.inference.server")


def create_app(config: EngineConfig, engine: Optional[InferenceEngine] = None) -> FastAPI:
    """Build the app; loads the model now (raises ``ModelLoadError``) unless ``engine`` is given."""
    eng = engine or InferenceEngine(config)
    served = ServedModel(config, eng)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        eng.start()
        activity = None
        if config.activity_interval > 0:
            activity = asyncio.create_task(EngineActivity(eng, config.activity_interval).run())
        yield
        if activity is not None:
            activity.cancel()
            await asyncio.gather(activity, return_exceptions=True)
        await asyncio.get_running_loop().run_in_executor(None, eng.stop)

    app = FastAPI(title="atroposlib CPU inference engine", lifespan=lifespan)
    install_openapi(app)
    app.state.engine = eng
    app.state.served = served
    # inside the request counter, so that the counter sees the 500s it sends
    app.add_middleware(FaultBarrier, render=fault_body, logger=logger)
    observability.install_request_counter(app, served)
    install_error_handlers(app)
    keyed = bool(config.api_key)
    protected = [Depends(require_api_key)] if keyed else []
    responses = errors(401) if keyed else None
    app.include_router(observability.open_router)
    for module in (generation, weights, observability):
        app.include_router(module.router, dependencies=protected, responses=responses)
    return app


__all__ = ["BadRequest", "create_app"]
