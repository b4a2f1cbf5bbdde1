"""The proxy's status: GET /health (its model, sessions, servers and counts; the one route open
without the key) and GET /servers (each backend server's url, health, model and type)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends

from atroposlib.inference_clients.proxy.auth import require_key
from atroposlib.inference_clients.proxy.deps import get_proxy
from atroposlib.inference_clients.proxy.responses import KEYED
from atroposlib.inference_clients.proxy.state import ProxyState

router = APIRouter()


@router.get("/health", response_model=None, status_code=200)
async def health(proxy: ProxyState = Depends(get_proxy)) -> dict[str, Any]:
    servers = proxy.server_manager.servers
    healthy = sum(1 for s in servers if getattr(s, "server_healthy", True))
    proxy.sessions.expire_idle()
    return {
        "status": "ok",
        "model": proxy.model_name,
        "sessions": len(proxy.sessions),
        "servers": len(servers),
        "healthy_servers": healthy,
        "counts": proxy.summary_counts(),
    }


@router.get(
    "/servers",
    response_model=None,
    status_code=200,
    responses=KEYED,
    dependencies=[Depends(require_key)],
)
async def servers(proxy: ProxyState = Depends(get_proxy)) -> dict[str, Any]:
    return {
        "servers": [
            {
                "index": i,
                "base_url": s.config.base_url,
                "healthy": getattr(s, "server_healthy", True),
                "model_name": s.config.model_name,
                "server_type": s.config.server_type,
            }
            for i, s in enumerate(proxy.server_manager.servers)
        ]
    }


__all__ = ["router"]
