"""GET /v1/models and GET /{uuid}/v1/models (a session's OpenAI base URL lists the same model; an
unknown session is a 404): the one model the proxy serves, in OpenAI's list shape."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends

from atroposlib.inference_clients.proxy.deps import get_proxy
from atroposlib.inference_clients.proxy.responses import KEYED, SESSION
from atroposlib.inference_clients.proxy.state import ProxyState

router = APIRouter()


def model_list(proxy: ProxyState) -> dict[str, Any]:
    """The served model as OpenAI lists models (with the backend's context length when known)."""
    item: dict[str, Any] = {
        "id": proxy.model_name,
        "object": "model",
        "created": 0,
        "owned_by": "atropos",
    }
    if proxy.max_model_len is not None:
        item["max_model_len"] = proxy.max_model_len
    return {"object": "list", "data": [item]}


@router.get("/v1/models", response_model=None, status_code=200, responses=KEYED)
async def models(proxy: ProxyState = Depends(get_proxy)) -> dict[str, Any]:
    return model_list(proxy)


@router.get("/{session_uuid}/v1/models", response_model=None, status_code=200, responses=SESSION)
async def session_models(
    session_uuid: str, proxy: ProxyState = Depends(get_proxy)
) -> dict[str, Any]:
    proxy.session(session_uuid)
    return model_list(proxy)


__all__ = ["model_list", "router"]
