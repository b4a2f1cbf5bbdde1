"""Trainer and env registration (Atropos 0.4 shapes): /register, /register-env, /disconnect-env,
/wandb_info, /info."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Request, Response
from fastapi.concurrency import run_in_threadpool

from atroposlib.api.deps import get_service, parse_model
from atroposlib.api.http import json_response
from atroposlib.api.openapi import request_body
from atroposlib.api.service import RunService
from atroposlib.type_definitions import (
    DisconnectEnvResponse,
    EnvIdentifier,
    Info,
    RegisterEnv,
    RegisterEnvResponse,
    RegisterResponse,
    Registration,
    WandbInfo,
)

router = APIRouter()


@router.post(
    "/register",
    response_model=RegisterResponse,
    status_code=200,
    openapi_extra=request_body(Registration),
)
async def register(request: Request, svc: RunService = Depends(get_service)) -> Response:
    reg = await parse_model(request, Registration, ids=("run_id",))
    return json_response(request, await run_in_threadpool(svc.register, reg))


@router.post(
    "/register-env",
    response_model=RegisterEnvResponse,
    status_code=200,
    openapi_extra=request_body(RegisterEnv),
)
async def register_env(request: Request, svc: RunService = Depends(get_service)) -> Response:
    req = await parse_model(request, RegisterEnv)
    return json_response(request, await run_in_threadpool(svc.register_env, req))


@router.post(
    "/disconnect-env",
    response_model=DisconnectEnvResponse,
    status_code=200,
    openapi_extra=request_body(EnvIdentifier),
)
async def disconnect_env(request: Request, svc: RunService = Depends(get_service)) -> Response:
    req = await parse_model(request, EnvIdentifier)
    return json_response(request, await run_in_threadpool(svc.disconnect_env, req.env_id))


@router.get("/wandb_info", response_model=WandbInfo, status_code=200)
async def wandb_info(request: Request, svc: RunService = Depends(get_service)) -> Response:
    return json_response(request, svc.wandb_info())


@router.get("/info", response_model=Info, status_code=200)
async def info(request: Request, svc: RunService = Depends(get_service)) -> Response:
    return json_response(request, svc.info())
