"""Ingest of scored groups: POST /scored_data and /scored_data_list.

Fast path: the body is parsed once with orjson and validated with ``ScoredData`` in strict mode
(exact JSON types); for a single group the received bytes themselves become the stored payload,
with Atropos's absent optional keys appended as nulls (``api.wire.with_null_keys``; the key list is
the schema's, ``type_definitions.ATROPOS_GROUP_KEYS``). Bodies that need lax coercion (e.g. ``1.0``
as a token id) take the slow path: lax validation, then the normalized dump is stored. Either way
the rules and messages are ``ScoredData``'s, plus two the model cannot state: a ``group_id`` with a
lone surrogate is refused (``body_json``), and so is a group nested deeper than ``MAX_GROUP_DEPTH``
(the fields typed ``Any`` are the ones that can nest; they are small, so the walk costs little).
The schema declares the bodies (``openapi.request_body``) that are parsed here by hand.
"""

from __future__ import annotations

import os
from typing import Any, Optional

import orjson
from fastapi import APIRouter, Depends, Request, Response
from fastapi.concurrency import run_in_threadpool
from pydantic import ValidationError

from atroposlib.api.body_json import nesting_depth
from atroposlib.api.deps import get_service
from atroposlib.api.http import (
    ApiProblem,
    json_response,
    parse_json_exact,
    read_body,
    validation_problem,
)
from atroposlib.api.intake import IncomingGroup
from atroposlib.api.offload import read_with_null_keys, receive_to_file
from atroposlib.api.openapi import request_body
from atroposlib.api.repair import note_repairs, repair_group
from atroposlib.api.service import RunService
from atroposlib.api.wire import with_null_keys
from atroposlib.type_definitions import (
    ATROPOS_GROUP_KEYS,
    MAX_GROUP_DEPTH,
    ScoredData,
    ScoredDataListResponse,
    ScoredDataResponse,
)

router = APIRouter()

# Keys Atropos 0.4 always put in a queued group (None when absent); trainers may index them directly.
LEGACY_KEYS = ATROPOS_GROUP_KEYS
# The fields whose type fixes how deeply they nest (lists of numbers, ids, flags); any other field
# (messages, generation_params, overrides, images, extra keys) is walked for its depth.
SHAPED_FIELDS = frozenset(
    {
        "tokens",
        "masks",
        "scores",
        "advantages",
        "ref_logprobs",
        "inference_logprobs",
        "env_id",
        "distill_token_ids",
        "distill_logprobs",
        "policy_version",
        "group_id",
        "reward_status",
        "reward_statuses",
        "overlong",
        "weights_versions",
    }
)
GROUP_IDS = ("group_id",)  # refused, never repaired, when they hold a lone surrogate


def check_depth(data: dict[str, Any], where: str) -> None:
    """422 when a field of the group nests deeper than ``MAX_GROUP_DEPTH`` levels in all."""
    for key, value in data.items():
        if key in SHAPED_FIELDS or not isinstance(value, (dict, list)):
            continue
        if 1 + nesting_depth(value, MAX_GROUP_DEPTH) > MAX_GROUP_DEPTH:
            raise ApiProblem(
                422,
                f"invalid request: {where + '.' if where else ''}{key} nests deeper than "
                f"{MAX_GROUP_DEPTH} levels; a trainer's JSON parser may not read it back",
            )


def build_group(data: Any, raw: Optional[bytes] = None, where: str = "") -> IncomingGroup:
    """Validate one group and produce its stored form (see module docstring)."""
    return _build(data, raw, where)[0]


def _build(
    data: Any, raw: Optional[bytes], where: str
) -> tuple[IncomingGroup, Optional[list[str]]]:
    """``build_group`` and, when the stored blob is ``raw`` plus null keys, those keys' names."""
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
    check_depth(data, where)
    missing = [k for k in LEGACY_KEYS if k not in data]
    if raw is not None:
        blob = with_null_keys(raw, missing)
    else:
        for k in missing:
            data[k] = None
        try:
            blob = orjson.dumps(data)
        except orjson.JSONEncodeError as e:  # e.g. nested deeper than any client can read
            raise ApiProblem(422, f"invalid request: {where or 'body'}: {e}") from None
    tokens = data["tokens"]
    group = IncomingGroup(
        blob=blob,
        n=len(tokens),
        env_id=data.get("env_id"),
        policy_version=data.get("policy_version"),
        max_len=max(len(t) for t in tokens),
        group_id=data.get("group_id"),
    )
    return group, (missing if raw is not None else None)


def _group_job(body: bytes) -> tuple[Any, ...]:
    """Parse, repair (``api.repair``) and validate one group (in the offload child for large
    bodies). When the stored blob is the body itself, only its metadata comes back: the server
    still holds the bytes. The last element is the list of optional fields the repair dropped."""
    data, exact = parse_json_exact(body, ids=GROUP_IDS)
    dropped = repair_group(data)
    g, missing = _build(data, body if exact and not dropped else None, "")
    if missing is not None:
        return ("exact", (g.n, g.env_id, g.policy_version, g.max_len, g.group_id), missing, dropped)
    return ("group", g, dropped)


def _list_job(body: bytes) -> tuple[list[IncomingGroup], list[list[str]]]:
    data, _ = parse_json_exact(body, ids=GROUP_IDS)  # groups are re-serialized one by one anyway
    if not isinstance(data, list):
        raise ApiProblem(422, "invalid request: body must be a JSON list of scored groups")
    dropped = [repair_group(g) for g in data]
    return [build_group(g, where=f"[{i}]") for i, g in enumerate(data)], dropped


def _ingest_list(
    svc: RunService,
    body: bytes,
    parsed: Optional[tuple[list[IncomingGroup], list[list[str]]]] = None,
) -> ScoredDataListResponse:
    groups, dropped = _list_job(body) if parsed is None else parsed
    for i, names in enumerate(dropped):
        note_repairs(svc, names, where=f"[{i}]")
    answers = svc.ingest(groups) if groups else []
    out = ScoredDataListResponse(status="received", groups_processed=len(groups))
    dups = sum(1 for a in answers if a.duplicate)
    if dups:
        out.duplicates = dups
    return out


@router.post(
    "/scored_data",
    response_model=ScoredDataResponse,
    status_code=200,
    openapi_extra=request_body(ScoredData, what="One scored group (gzip allowed)."),
)
async def scored_data(request: Request, svc: RunService = Depends(get_service)) -> Response:
    settings = request.app.state.settings
    declared = request.headers.get("content-length", "")
    if (
        declared.isdigit()
        and settings.offload_min_bytes <= int(declared) <= settings.max_body_bytes
        and not request.headers.get("content-encoding", "").strip()
    ):
        group = await _large_group(request, settings, svc)
        return json_response(request, (await run_in_threadpool(svc.ingest, [group]))[0])
    body = await read_body(request)
    if len(body) >= settings.offload_min_bytes:  # see atroposlib.api.offload
        out = await request.app.state.offload.run(_group_job, body)
        if out[0] == "exact":
            blob = await run_in_threadpool(with_null_keys, body, out[2])
            group = IncomingGroup(blob, *out[1])
        else:
            group = out[1]
        note_repairs(svc, out[-1])
    else:
        # Parsed and validated on the event loop: orjson and pydantic hold the GIL throughout
        # (~3 ms for a 1 MB group), so a worker thread would not keep the loop responsive and
        # only adds GIL hand-offs (measured slower). The store's write and commit run in a thread.
        data, exact = parse_json_exact(body, ids=GROUP_IDS)  # not exact: repaired, re-serialized
        dropped = repair_group(data)
        group = build_group(data, raw=body if exact and not dropped else None)
        note_repairs(svc, dropped)
    answers = await run_in_threadpool(svc.ingest, [group])
    return json_response(request, answers[0])


async def _large_group(request: Request, settings: Any, svc: RunService) -> IncomingGroup:
    """A large uncompressed body: streamed to a file, parsed in the offload child, read back."""
    path = await receive_to_file(request, settings.max_body_bytes)
    try:
        out = await request.app.state.offload.run_on_file(_group_job, path)
        note_repairs(svc, out[-1])
        if out[0] == "exact":
            blob = await run_in_threadpool(read_with_null_keys, path, out[2])
            return IncomingGroup(blob, *out[1])
        group: IncomingGroup = out[1]
        return group
    finally:
        os.unlink(path)


@router.post(
    "/scored_data_list",
    response_model=ScoredDataListResponse,
    status_code=200,
    openapi_extra=request_body(ScoredData, many=True, what="Scored groups, all or none."),
)
async def scored_data_list(request: Request, svc: RunService = Depends(get_service)) -> Response:
    body = await read_body(request)
    parsed = None
    if len(body) >= request.app.state.settings.offload_min_bytes:
        parsed = await request.app.state.offload.run(_list_job, body)
    return json_response(request, await run_in_threadpool(_ingest_list, svc, body, parsed))
