"""Trainer and env registration (Atropos 0.4 shapes): /register, /register-env, /disconnect-env,
/wandb_info, /info."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Request
from fastapi.concurrency import run_in_threadpool

from atroposlib.api.deps import get_service, parse_model
from atroposlib.api.http import json_response
from atroposlib.api.service import RunService
from atroposlib.type_definitions import EnvIdentifier, RegisterEnv, Registration

router = APIRouter()


@router.post("/register")
async def register(request: Request, svc: RunService = Depends(get_service)):
    reg = await parse_model(request, Registration)
    return json_response(request, await run_in_threadpool(svc.register, reg))


@router.post("/register-env")
async def register_env(request: Request, svc: RunService = Depends(get_service)):
    req = await parse_model(request, RegisterEnv)
    return json_response(request, await run_in_threadpool(svc.register_env, req))


@router.post("/disconnect-env")
async def disconnect_env(request: Request, svc: RunService = Depends(get_service)):
    req = await parse_model(request, EnvIdentifier)
    return json_response(request, await run_in_threadpool(svc.disconnect_env, req.env_id))


@router.get("/wandb_info")
async def wandb_info(request: Request, svc: RunService = Depends(get_service)):
    return json_response(request, svc.wandb_info())


@router.get("/info")
async def info(request: Request, svc: RunService = Depends(get_service)):
    return json_response(request, svc.info())
