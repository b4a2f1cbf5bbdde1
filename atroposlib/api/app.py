"""``create_app(settings)``: the trajectory API as a FastAPI app (routers, auth, errors, state).

Every route but ``/`` and ``/health`` requires the bearer token when one is configured (and the
schema then declares the scheme). While it runs, ``activity.ActivityLog`` logs one line per
``progress_interval`` in which groups arrived. Errors are ``ErrorResponse`` JSON (``{"error",
"detail"}``) with a precise status; client mistakes are logged on one line without a traceback,
server faults (500) with one, by the ``FaultBarrier``, which keeps the client's connection open.
The schema (``create_app(settings).openapi()``) declares the bodies parsed by hand (``openapi``).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any, Optional, Union

from fastapi import Depends, FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.middleware.cors import CORSMiddleware
from fastapi.responses import Response
from starlette.exceptions import HTTPException as StarletteHTTPException

from atroposlib.api.activity import ActivityLog
from atroposlib.api.http import ApiProblem, check_token, json_response, problem_response, to_json
from atroposlib.api.metrics import ApiMetrics
from atroposlib.api.offload import BodyOffload
from atroposlib.api.openapi import install_openapi
from atroposlib.api.routes import admin, batches, ingest, registration, status
from atroposlib.api.service import RunService
from atroposlib.api.settings import ApiSettings
from atroposlib.api.store import Store, make_store
from atroposlib.type_definitions import ErrorResponse, Health, RootResponse
from atroposlib.utils.fault_barrier import FaultBarrier

logger = logging.getLogger("atroposlib.api")

# Declared for the schema: every route behind the token may answer these, as ``ErrorResponse`` JSON.
ERROR_RESPONSES: dict[Union[int, str], dict[str, Any]] = {
    code: {"model": ErrorResponse, "description": what}
    for code, what in [
        (400, "corrupt gzip body, or the client went away before sending the whole body"),
        (404, "unknown env or batch"),
        (409, "conflicts with the run's state"),
        (413, "request body too large"),
        (415, "unsupported Content-Encoding"),
        (422, "invalid request"),
        (503, "queue full; retry after Retry-After seconds"),
    ]
}
UNAUTHORIZED: dict[Union[int, str], dict[str, Any]] = {
    401: {"model": ErrorResponse, "description": "missing or wrong bearer token"}
}


def _fault_body(exc: BaseException) -> bytes:
    """The ``ErrorResponse`` of a server fault (500)."""
    return to_json(ErrorResponse(error=f"internal error: {type(exc).__name__}"))


def create_app(settings: Optional[ApiSettings] = None, store: Optional[Store] = None) -> FastAPI:
    """Build the app; the run state is restored from the store (``settings.data_dir`` for SQLite)."""
    settings = settings or ApiSettings()
    store = store or make_store(settings)
    metrics = ApiMetrics()
    service = RunService(settings, store, metrics)

    offload = BodyOffload()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        if settings.offload_min_bytes < settings.max_decompressed_bytes:
            offload.warm_in_background()
        activity = None
        if settings.progress_interval > 0:
            log = ActivityLog(metrics, service.status, settings.progress_interval)
            activity = asyncio.create_task(log.run())
        yield
        if activity is not None:
            activity.cancel()
            await asyncio.gather(activity, return_exceptions=True)
        offload.close()
        store.close()

    app = FastAPI(
        title="atroposlib trajectory API",
        lifespan=lifespan,
        docs_url=None,
        redoc_url=None,
        openapi_url=None,
    )
    install_openapi(app)
    app.state.settings = settings
    app.state.service = service
    app.state.offload = offload

    if settings.cors_origins:
        wildcard = "*" in settings.cors_origins
        app.add_middleware(
            CORSMiddleware,
            allow_origins=settings.cors_origins,
            allow_credentials=not wildcard,  # never `*` together with credentials
            allow_methods=["GET", "POST"],
            allow_headers=["Authorization", "Content-Type", "Content-Encoding"],
        )

    @app.exception_handler(ApiProblem)
    async def on_problem(request: Request, exc: ApiProblem) -> Response:
        service.metrics.rejected.labels(str(exc.status_code)).inc()
        logger.warning(
            "%s %s -> %d: %s", request.method, request.url.path, exc.status_code, exc.error
        )
        return problem_response(exc)

    @app.exception_handler(RequestValidationError)
    async def on_validation(request: Request, exc: RequestValidationError) -> Response:
        parts = []
        for err in exc.errors():
            loc = ".".join(str(p) for p in err.get("loc", ()))
            parts.append(f"{loc}: {err.get('msg')}")
        return await on_problem(
            request, ApiProblem(422, "invalid request: " + "; ".join(parts), detail=parts)
        )

    @app.exception_handler(StarletteHTTPException)
    async def on_http(request: Request, exc: StarletteHTTPException) -> Response:
        # keep the exception's headers (405 carries ``Allow``)
        headers = dict(exc.headers) if exc.headers else None
        return await on_problem(
            request, ApiProblem(exc.status_code, str(exc.detail), headers=headers)
        )

    app.add_middleware(
        FaultBarrier,
        render=_fault_body,
        logger=logger,
        on_fault=lambda exc: service.metrics.rejected.labels("500").inc(),
    )

    @app.get("/", response_model=RootResponse, status_code=200)
    async def root(request: Request) -> Response:
        return json_response(request, RootResponse(message="AtroposLib API"))

    @app.get("/health", response_model=Health, status_code=200)
    async def health(request: Request) -> Response:
        return json_response(
            request,
            Health(status="ok", store=settings.store, durable=store.durable, step=service.step),
        )

    protected = [Depends(check_token)] if settings.api_token else []
    responses = {**ERROR_RESPONSES, **(UNAUTHORIZED if settings.api_token else {})}
    for module in (registration, ingest, batches, status, admin):
        app.include_router(module.router, dependencies=protected, responses=responses)
    return app


__all__ = ["create_app"]
