"""FastAPI dependencies and small request helpers shared by the routers."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeVar

import orjson
from fastapi import Request
from pydantic import BaseModel, ValidationError

from atroposlib.api.body_json import parse_json_exact
from atroposlib.api.http import ApiProblem, read_body, validation_problem
from atroposlib.api.service import RunService

M = TypeVar("M", bound=BaseModel)


async def get_service(request: Request) -> RunService:
    """The run state of this app (set by ``create_app``). A coroutine, like every dependency here:
    FastAPI runs a plain ``def`` dependency in its thread pool, two thread hand-offs per request."""
    service: RunService = request.app.state.service
    return service


async def parse_model(request: Request, model: type[M], ids: Sequence[str] = ()) -> M:
    """Read, bound, gunzip and validate a small JSON body into ``model`` (422 naming the field).

    Lone surrogates in its strings are repaired as in groups (``body_json``), except in the ``ids``
    fields, where they are a 422. The result must be what the SQLite store can write (orjson: no
    integer past 64 bits, no nesting past its limit), so that both stores take the same bodies."""
    data, _ = parse_json_exact(await read_body(request), ids=ids)
    try:
        parsed = model.model_validate(data)
    except ValidationError as e:
        raise validation_problem(e) from None
    try:
        orjson.dumps(parsed.model_dump())
    except orjson.JSONEncodeError as e:
        raise ApiProblem(422, f"invalid request: the body cannot be stored: {e}") from None
    return parsed


__all__ = ["get_service", "parse_model"]
