"""Read-only views: /status, /status-env (JSON body on a GET, as Atropos clients send it), /peek,
/metrics. (The open / and /health live in app.py.)"""

from __future__ import annotations

from typing import Optional

from fastapi import APIRouter, Depends, Query, Request, Response
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import PlainTextResponse
from pydantic import ValidationError

from atroposlib.api.deps import get_service
from atroposlib.api.http import ApiProblem, json_response, parse_json, read_body, validation_problem
from atroposlib.api.openapi import request_body
from atroposlib.api.service import RunService
from atroposlib.type_definitions import MAX_INT64, EnvIdentifier, PeekResponse, Status, StatusEnv

router = APIRouter()


@router.get("/status", response_model=Status, status_code=200)
async def status(request: Request, svc: RunService = Depends(get_service)) -> Response:
    return json_response(request, svc.status())


@router.get(
    "/status-env",
    response_model=StatusEnv,
    status_code=200,
    openapi_extra=request_body(
        EnvIdentifier, required=False, what="Atropos clients send env_id as a JSON body on the GET."
    ),
)
async def status_env(
    request: Request,
    env_id: Optional[int] = Query(
        None, ge=0, le=MAX_INT64, description="The env (or as a JSON body, as Atropos sends it)."
    ),
    svc: RunService = Depends(get_service),
) -> Response:
    body = await read_body(request)
    if body.strip():
        data = parse_json(body)
    elif env_id is not None:
        data = {"env_id": env_id}
    else:
        raise ApiProblem(422, 'invalid request: env_id is required (JSON body {"env_id": n})')
    try:
        env = EnvIdentifier.model_validate(data)
    except ValidationError as e:
        raise validation_problem(e) from None
    return json_response(request, svc.status_env(env.env_id))


@router.get("/peek", response_model=PeekResponse, status_code=200)
async def peek(
    request: Request,
    limit: int = Query(50, ge=1, le=1000, description="Most groups to return."),
    after: Optional[int] = Query(
        None, ge=0, le=MAX_INT64, description="Only groups with seq > after."
    ),
    env: Optional[str] = Query(None, description="Only groups of this env (its wandb_name)."),
    svc: RunService = Depends(get_service),
) -> Response:
    # pre-serialised: the stored payloads are spliced in, never parsed (``PeekResponse`` shape)
    return json_response(request, await run_in_threadpool(svc.peek, limit, after, env))


@router.get("/metrics", response_class=PlainTextResponse, status_code=200)
async def metrics(request: Request, svc: RunService = Depends(get_service)) -> Response:
    return PlainTextResponse(svc.metrics.render(), media_type="text/plain; version=0.0.4")
