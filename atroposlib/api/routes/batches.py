"""The trainer's side of the queue: GET /batch (+ our POST /batch/ack) and GET /latest_example."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Request
from fastapi.concurrency import run_in_threadpool

from atroposlib.api.deps import get_service, parse_model
from atroposlib.api.http import json_response
from atroposlib.api.service import RunService
from atroposlib.type_definitions import BatchAck

router = APIRouter()


@router.get("/batch")
async def get_batch(request: Request, svc: RunService = Depends(get_service)):
    return json_response(request, await run_in_threadpool(svc.get_batch))


@router.post("/batch/ack")
async def ack_batch(request: Request, svc: RunService = Depends(get_service)):
    ack = await parse_model(request, BatchAck)
    return json_response(request, await run_in_threadpool(svc.ack, ack.batch_id))


@router.get("/latest_example")
async def latest_example(request: Request, svc: RunService = Depends(get_service)):
    return json_response(request, await run_in_threadpool(svc.latest_example))
