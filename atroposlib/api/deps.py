"""FastAPI dependencies and small request helpers shared by the routers."""

from __future__ import annotations

from typing import TypeVar

from fastapi import Request
from pydantic import BaseModel, ValidationError

from atroposlib.api.http import parse_json, read_body, validation_problem
from atroposlib.api.service import RunService

M = TypeVar("M", bound=BaseModel)


async def get_service(request: Request) -> RunService:
    """The run state of this app (set by ``create_app``). A coroutine, like every dependency here:
    FastAPI runs a plain ``def`` dependency in its thread pool, two thread hand-offs per request."""
    service: RunService = request.app.state.service
    return service


async def parse_model(request: Request, model: type[M]) -> M:
    """Read, bound, gunzip and validate a small JSON body into ``model`` (422 naming the field)."""
    data = parse_json(await read_body(request))
    try:
        return model.model_validate(data)
    except ValidationError as e:
        raise validation_problem(e) from None


__all__ = ["get_service", "parse_model"]
