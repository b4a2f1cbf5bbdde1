"""Ingest of scored groups: POST /scored_data and /scored_data_list.

Fast path: the body is parsed once with orjson and validated with ``ScoredData`` in strict mode
(exact JSON types); for a single group the received bytes themselves become the stored payload,
with Atropos's absent optional keys appended as nulls. Bodies that need lax coercion (e.g. ``1.0``
as a token id) take the slow path: lax validation, then the normalized dump is stored. Either way
the rules and messages are ``ScoredData``'s.
"""

from __future__ import annotations

from typing import Any, Optional

import orjson
from fastapi import APIRouter, Depends, Request
from fastapi.concurrency import run_in_threadpool
from pydantic import ValidationError

from atroposlib.api.deps import get_service
from atroposlib.api.http import (
    ApiProblem,
    json_response,
    parse_json_exact,
    read_body,
    validation_problem,
)
from atroposlib.api.intake import IncomingGroup
from atroposlib.api.service import RunService
from atroposlib.type_definitions import ScoredData

router = APIRouter()

# Keys Atropos 0.4 always put in a queued group (None when absent); trainers may index them directly.
LEGACY_KEYS = (
    "tokens",
    "masks",
    "scores",
    "advantages",
    "ref_logprobs",
    "messages",
    "generation_params",
    "inference_logprobs",
    "overrides",
    "group_overrides",
    "images",
    "env_id",
)


def build_group(data: Any, raw: Optional[bytes] = None, where: str = "") -> IncomingGroup:
    """Validate one group and produce its stored form (see module docstring)."""
    if not isinstance(data, dict):
        raise ApiProblem(
            422, f"invalid request: {where or 'body'}: a scored group must be a JSON object"
        )
    try:
        ScoredData.model_validate(data, strict=True)
    except ValidationError:
        try:
            model = ScoredData.model_validate(data)
        except ValidationError as e:
            raise validation_problem(e, prefix=where) from None
        data = model.model_dump()
        raw = None
    missing = [k for k in LEGACY_KEYS if k not in data]
    if raw is not None:
        raw = raw.rstrip()
        if missing:  # one copy: the object without its closing brace, then the null keys
            nulls = b",".join(b'"' + k.encode() + b'":null' for k in missing)
            raw = b"".join((memoryview(raw)[:-1], b",", nulls, b"}"))
        blob = raw
    else:
        for k in missing:
            data[k] = None
        try:
            blob = orjson.dumps(data)
        except orjson.JSONEncodeError as e:  # e.g. nested deeper than any client can read
            raise ApiProblem(422, f"invalid request: {where or 'body'}: {e}") from None
    tokens = data["tokens"]
    return IncomingGroup(
        blob=blob,
        n=len(tokens),
        env_id=data.get("env_id"),
        policy_version=data.get("policy_version"),
        max_len=max(len(t) for t in tokens),
        group_id=data.get("group_id"),
    )


def _ingest_list(svc: RunService, body: bytes):
    data, _ = parse_json_exact(body)  # groups are re-serialized one by one anyway
    if not isinstance(data, list):
        raise ApiProblem(422, "invalid request: body must be a JSON list of scored groups")
    groups: list[IncomingGroup] = [build_group(g, where=f"[{i}]") for i, g in enumerate(data)]
    answers = svc.ingest(groups) if groups else []
    out = {"status": "received", "groups_processed": len(data)}
    dups = sum(1 for a in answers if a.get("duplicate"))
    if dups:
        out["duplicates"] = dups
    return out


@router.post("/scored_data")
async def scored_data(request: Request, svc: RunService = Depends(get_service)):
    body = await read_body(request)
    # Parsed and validated on the event loop: orjson and pydantic hold the GIL throughout (~3 ms
    # for a 1 MB group), so a worker thread would not keep the loop responsive meanwhile and only
    # adds GIL hand-offs (measured slower). The store's write and commit run in a worker thread.
    data, exact = parse_json_exact(body)  # not exact: repaired, stored re-serialized
    group = build_group(data, raw=body if exact else None)
    answers = await run_in_threadpool(svc.ingest, [group])
    return json_response(request, answers[0])


@router.post("/scored_data_list")
async def scored_data_list(request: Request, svc: RunService = Depends(get_service)):
    body = await read_body(request)
    return json_response(request, await run_in_threadpool(_ingest_list, svc, body))
