"""The trainer's side of the queue: GET /batch (+ our POST /batch/ack) and GET /latest_example.

``GET /batch`` is sent from the stored payloads without joining them, and says where each group's
JSON lies in the body (``X-Batch-Group-Bytes``) so that a client can parse the groups one by one
(the framing is ``api.wire``'s, shared with the client).
"""

from __future__ import annotations

from typing import Any, Optional

from fastapi import APIRouter, Depends, Header, Request, Response
from fastapi.concurrency import run_in_threadpool

from atroposlib.api.delivery import ACK_MODE_HEADER
from atroposlib.api.deps import get_service, parse_model
from atroposlib.api.http import PartsResponse, json_response
from atroposlib.api.openapi import request_body
from atroposlib.api.service import RunService
from atroposlib.api.wire import GROUP_BYTES_HEADER
from atroposlib.type_definitions import BatchAck, BatchAckResponse, BatchResponse

router = APIRouter()


BATCH_HEADERS = {
    GROUP_BYTES_HEADER: {
        "description": "Each group's JSON size in the body, in order (absent when gzipped or null).",
        "schema": {"type": "string", "pattern": "^[0-9]+(,[0-9]+)*$"},
    }
}


@router.get(
    "/batch",
    response_model=BatchResponse,
    status_code=200,
    responses={200: {"headers": BATCH_HEADERS}},
)
async def get_batch(
    request: Request,
    ack_mode: Optional[str] = Header(
        None,
        alias=ACK_MODE_HEADER,
        description="'explicit': the caller acks with POST /batch/ack, so an unacknowledged batch "
        "is delivered again instead of being acknowledged by this call (see docs/api.md).",
    ),
    svc: RunService = Depends(get_service),
) -> Response:
    explicit = (ack_mode or "").strip().lower() == "explicit"
    body = await run_in_threadpool(svc.get_batch_body, explicit)
    settings = request.app.state.settings
    if body.nbytes >= settings.gzip_min_bytes and "gzip" in request.headers.get(
        "accept-encoding", ""
    ):
        return json_response(request, bytes(body))
    # pre-serialised (``BatchResponse`` shape): sent from the stored payloads, framing in api.wire
    return PartsResponse(body.parts, headers=body.headers())


@router.post(
    "/batch/ack",
    response_model=BatchAckResponse,
    status_code=200,
    openapi_extra=request_body(BatchAck),
)
async def ack_batch(request: Request, svc: RunService = Depends(get_service)) -> Response:
    ack = await parse_model(request, BatchAck)
    return json_response(request, await run_in_threadpool(svc.ack, ack.batch_id))


@router.get(
    "/latest_example",
    response_model=dict[str, Any],
    status_code=200,
    description="The newest queued group as stored (Atropos's empty lists before any group).",
)
async def latest_example(request: Request, svc: RunService = Depends(get_service)) -> Response:
    return json_response(request, await run_in_threadpool(svc.latest_example))
