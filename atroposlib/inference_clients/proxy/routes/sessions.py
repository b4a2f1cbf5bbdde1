"""The proxy's sessions: POST /sessions/create (on the server at ``base_url``, else the least busy;
a 429 at ``--max-sessions`` open ones), GET /sessions, GET /{uuid}/nodes (what its managed server
recorded), DELETE /{uuid}."""

from __future__ import annotations

import uuid as uuid_lib
from typing import Any

from fastapi import APIRouter, Depends

from atroposlib.inference_clients.proxy.deps import get_proxy
from atroposlib.inference_clients.proxy.http import refuse
from atroposlib.inference_clients.proxy.protocol import SessionCreateRequest
from atroposlib.inference_clients.proxy.responses import CREATE_RESPONSES, KEYED, SESSION
from atroposlib.inference_clients.proxy.servers import open_managed
from atroposlib.inference_clients.proxy.sessions import SessionState
from atroposlib.inference_clients.proxy.state import ProxyState
from atroposlib.inference_clients.tool_call_translator import ToolCallTranslator

router = APIRouter()


@router.post("/sessions/create", response_model=None, status_code=200, responses=CREATE_RESPONSES)
async def create_session(
    req: SessionCreateRequest, proxy: ProxyState = Depends(get_proxy)
) -> dict[str, Any]:
    if proxy.sessions.full:
        proxy.counts["refused:max_sessions"] += 1
        raise refuse(
            429,
            f"{proxy.sessions.max_sessions} sessions are open (--max-sessions): close finished ones "
            f"(DELETE /{{uuid}}), or they close after {proxy.sessions.idle_timeout:g} s idle",
        )
    server = proxy.pick_server(req.base_url)
    manager = proxy.server_manager
    managed = open_managed(server, proxy.tokenizer, manager, req.track_tree)
    manager.managed_stats.sessions += 1
    session = SessionState(
        str(uuid_lib.uuid4()),
        managed,
        ToolCallTranslator(proxy.tokenizer, req.tool_parser),
        proxy.model_name,
        server.config.base_url,
        max_turns=req.max_turns,
    )
    proxy.sessions.add(session)
    return {
        "uuid": session.uuid,
        "model_name": proxy.model_name,
        "tool_parser": req.tool_parser,
        "base_url": session.base_url,
        "created_at": session.created_at,
        "max_turns": session.max_turns,
    }


@router.get("/sessions", response_model=None, status_code=200, responses=KEYED)
async def list_sessions(proxy: ProxyState = Depends(get_proxy)) -> dict[str, Any]:
    return {"sessions": [s.summary() for s in proxy.sessions]}


@router.get("/{session_uuid}/nodes", response_model=None, status_code=200, responses=SESSION)
async def nodes(session_uuid: str, proxy: ProxyState = Depends(get_proxy)) -> dict[str, Any]:
    session = proxy.session(session_uuid)
    found = session.recorded_nodes()
    return {
        "nodes": [n.model_dump() for n in found],
        "completions": session.completions,
        "turns": session.turns,
        "turn_limit_hit": session.turn_limit_hit,
    }


@router.delete("/{session_uuid}", response_model=None, status_code=200, responses=SESSION)
async def delete(session_uuid: str, proxy: ProxyState = Depends(get_proxy)) -> dict[str, Any]:
    proxy.session(session_uuid)
    proxy.sessions.remove(session_uuid)
    return {"status": "deleted", "uuid": session_uuid}


__all__ = ["router"]
