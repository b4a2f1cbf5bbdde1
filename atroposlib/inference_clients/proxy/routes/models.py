"""GET /v1/models: the one model the proxy serves, in OpenAI's list shape."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends

from atroposlib.inference_clients.proxy.deps import get_proxy
from atroposlib.inference_clients.proxy.state import ProxyState

router = APIRouter()


@router.get("/v1/models", response_model=None, status_code=200)
async def models(proxy: ProxyState = Depends(get_proxy)) -> dict[str, Any]:
    item = {"id": proxy.model_name, "object": "model", "created": 0, "owned_by": "atropos"}
    return {"object": "list", "data": [item]}


__all__ = ["router"]
