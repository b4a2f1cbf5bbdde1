"""GET /health, /metadata and /schema, answered as openenv's servers answer them."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends

from atroposlib.interop.openenv.serve_deps import get_served_env
from atroposlib.interop.openenv.serve_state import ServedEnv

router = APIRouter()


@router.get("/health", status_code=200)
async def health() -> dict[str, Any]:
    return {"status": "healthy"}


@router.get("/metadata", status_code=200)
async def metadata(served: ServedEnv = Depends(get_served_env)) -> dict[str, Any]:
    env = served.env
    doc = (type(env).__doc__ or "").strip().splitlines()
    return {
        "name": getattr(env, "name", None) or type(env).__name__,
        "description": doc[0] if doc else "An Atropos environment",
        "version": None,
    }


@router.get("/schema", status_code=200)
async def schema(served: ServedEnv = Depends(get_served_env)) -> dict[str, Any]:
    text = {"type": "string"}
    field = served.action_field
    return {
        "action": {"type": "object", "properties": {field: text}, "required": [field]},
        "observation": {
            "type": "object",
            "properties": {"prompt": text, "messages": {"type": ["array", "null"]}},
        },
        "state": {
            "type": "object",
            "properties": {"episode_id": text, "step_count": {"type": "integer"}},
        },
    }


__all__ = ["router"]
