"""Destructive administration: POST /reset (ours) and the legacy GET /reset_data."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Request, Response
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import PlainTextResponse

from atroposlib.api.deps import get_service
from atroposlib.api.http import json_response
from atroposlib.api.service import RunService
from atroposlib.type_definitions import StatusMessage

router = APIRouter()


@router.post("/reset", response_model=StatusMessage, status_code=200)
async def reset(request: Request, svc: RunService = Depends(get_service)) -> Response:
    await run_in_threadpool(svc.reset)
    return json_response(request, StatusMessage(status="reset"))


@router.get("/reset_data", response_class=PlainTextResponse, status_code=200)
async def reset_data(svc: RunService = Depends(get_service)) -> Response:
    await run_in_threadpool(svc.reset)
    return PlainTextResponse("Reset successful")
