"""Observability: GET /health (``open_router``: answered without the API key, for readiness
probes), GET /metrics (Prometheus; behind the key like every other route), and the per-request
counter behind ``atropos_inference_requests_total`` (a middleware ``create_app`` installs)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, FastAPI, Request
from fastapi.responses import PlainTextResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST

from atroposlib.inference.deps import get_served
from atroposlib.inference.served import ServedModel

open_router = APIRouter()
router = APIRouter()


def install_request_counter(app: FastAPI, served: ServedModel) -> None:
    """Count every POST under /v1/ by path and status code."""

    @app.middleware("http")
    async def count_requests(request: Request, call_next: Any) -> Response:
        response: Response = await call_next(request)
        path = request.url.path
        if path.startswith("/v1/") and request.method == "POST":
            served.engine.metrics.requests.labels(path, str(response.status_code)).inc()
        return response


@open_router.get("/health")
async def health(served: ServedModel = Depends(get_served)) -> dict[str, Any]:
    eng = served.engine
    return {
        "status": "ok",
        "model": served.name,
        "model_path": str(eng.model_path),
        "weights_version": eng.weights_version,
        "queue_depth": eng.queue_depth(),
        "max_model_len": eng.max_model_len,
        "device": str(next(eng.loaded.model.parameters()).device),
    }


@router.get("/metrics", response_class=PlainTextResponse)
async def metrics(served: ServedModel = Depends(get_served)) -> Response:
    eng = served.engine
    eng.metrics.queue_depth.set(eng.queue_depth())
    return Response(eng.metrics.render(), media_type=CONTENT_TYPE_LATEST)


__all__ = ["install_request_counter", "open_router", "router"]
