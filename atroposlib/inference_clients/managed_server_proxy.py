"""An OpenAI-compatible HTTP front for managed servers, one session each (Atropos's
``managed_server_proxy``).

External agent code that only speaks OpenAI's chat API creates a session (``POST
/sessions/create``) and sends ``POST /{uuid}/v1/chat/completions``; every generation is recorded
token-exactly by that session's managed server and can be read back from ``GET /{uuid}/nodes``
(tokens, masks, logprobs) by the env that owns the session. Tool calls are translated both ways
(see ``tool_call_translator``); blocks that do not parse come back in the message's
``tool_call_errors``. Every session counts into the proxy's ``ServerManager.managed_stats``.
Text-only (``openai``) backends get placeholder logprobs.

Endpoints: ``GET /health``, ``GET /v1/models``, ``GET /servers``, ``POST /sessions/create``,
``GET /sessions``, ``POST /{uuid}/v1/chat/completions``, ``POST /{uuid}/v1/chat/completions/render``,
``GET /{uuid}/nodes``, ``DELETE /{uuid}``. Errors use OpenAI's ``{"error": {...}}`` body.
"""

from __future__ import annotations

import logging
import time
import uuid as uuid_lib
from dataclasses import dataclass, field
from typing import Any, Optional

from fastapi import FastAPI, HTTPException, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field

from atroposlib.inference_clients.managed_server import DummyManagedServer, ManagedServer
from atroposlib.inference_clients.server_manager import ServerManager
from atroposlib.inference_clients.tool_call_translator import ToolCallTranslator
from atroposlib.utils.openai_shapes import openai_choice, openai_response
from atroposlib.utils.tokenize_for_trainer import render_chat

logger = logging.getLogger(__name__)


class ChatMessage(BaseModel):
    role: str
    content: Optional[str] = None
    tool_calls: Optional[list[dict]] = None
    tool_call_id: Optional[str] = None
    name: Optional[str] = None


class ChatCompletionProxyRequest(BaseModel):
    messages: list[ChatMessage]
    max_tokens: int = Field(default=1024, ge=1)
    temperature: float = Field(default=1.0, ge=0.0)
    n: int = Field(default=1, ge=1)
    stop: Optional[list[str]] = None
    tools: Optional[list[dict]] = None
    tool_choice: Optional[Any] = None


class SessionCreateRequest(BaseModel):
    tool_parser: str = "hermes"
    track_tree: bool = False
    base_url: Optional[str] = None


@dataclass
class SessionState:
    uuid: str
    managed_server: Any
    translator: ToolCallTranslator
    model_name: str
    base_url: Optional[str] = None
    created_at: float = field(default_factory=time.time)
    last_accessed: float = field(default_factory=time.time)


def openai_error(status_code: int, message: str, error_type: str = "invalid_request_error"):
    body = {"error": {"message": message, "type": error_type, "code": status_code}}
    return JSONResponse(status_code=status_code, content=body)


def _free(server: Any) -> int:
    sem = server.sem
    return sem.available() if hasattr(sem, "available") else int(getattr(sem, "_value", 0))


def create_app(
    server_manager: ServerManager, tokenizer: Any, model_name: str = "unknown"
) -> FastAPI:
    """The proxy app over ``server_manager``'s servers (see the module docstring)."""
    app = FastAPI(title="ManagedServer OpenAI proxy")
    sessions: dict[str, SessionState] = {}

    def session_of(session_uuid: str) -> SessionState:
        if session_uuid not in sessions:
            raise HTTPException(404, f"Session {session_uuid} not found")
        sessions[session_uuid].last_accessed = time.time()
        return sessions[session_uuid]

    def pick(base_url: Optional[str]) -> Any:
        servers = server_manager.servers
        if base_url is not None:
            for s in servers:
                if (s.config.base_url or "").rstrip("/") == base_url.rstrip("/"):
                    return s
            urls = [s.config.base_url for s in servers]
            raise HTTPException(404, f"No server with base_url '{base_url}'. Available: {urls}")
        healthy = [s for s in servers if getattr(s, "server_healthy", True)] or servers
        return max(healthy, key=_free)

    def render(messages: list[ChatMessage], tools: Optional[list[dict]], tr: ToolCallTranslator):
        msgs = tr.convert_messages_for_template([m.model_dump(exclude_none=True) for m in messages])
        if tools:
            return tokenizer.apply_chat_template(
                msgs, tokenize=False, add_generation_prompt=True, tools=tools
            )
        return render_chat(tokenizer, msgs, add_generation_prompt=True)

    @app.exception_handler(HTTPException)
    async def _http_error(_: Request, exc: HTTPException):
        return openai_error(exc.status_code, str(exc.detail))

    @app.exception_handler(RequestValidationError)
    async def _bad_body(_: Request, exc: RequestValidationError):
        first = exc.errors()[0] if exc.errors() else {}
        where = ".".join(str(p) for p in first.get("loc", ()))
        return openai_error(422, f"{where}: {first.get('msg', 'invalid request')}")

    @app.get("/health")
    async def health():
        healthy = sum(1 for s in server_manager.servers if getattr(s, "server_healthy", True))
        return {
            "status": "ok",
            "model": model_name,
            "sessions": len(sessions),
            "servers": len(server_manager.servers),
            "healthy_servers": healthy,
        }

    @app.get("/v1/models")
    async def models():
        item = {"id": model_name, "object": "model", "created": 0, "owned_by": "atropos"}
        return {"object": "list", "data": [item]}

    @app.get("/servers")
    async def servers():
        return {
            "servers": [
                {
                    "index": i,
                    "base_url": s.config.base_url,
                    "healthy": getattr(s, "server_healthy", True),
                    "model_name": s.config.model_name,
                    "server_type": s.config.server_type,
                }
                for i, s in enumerate(server_manager.servers)
            ]
        }

    @app.post("/sessions/create")
    async def create_session(req: SessionCreateRequest):
        server = pick(req.base_url)
        if getattr(server, "supports_tokens", False):
            managed: Any = ManagedServer(
                server,
                tokenizer,
                track_tree=req.track_tree,
                on_token_drift=server_manager.on_token_drift,
                stats=server_manager.managed_stats,
            )
        else:
            managed = DummyManagedServer(server, tokenizer, stats=server_manager.managed_stats)
        server_manager.managed_stats.sessions += 1
        sid = str(uuid_lib.uuid4())
        state = SessionState(
            sid,
            managed,
            ToolCallTranslator(tokenizer, req.tool_parser),
            model_name,
            server.config.base_url,
        )
        sessions[sid] = state
        return {
            "uuid": sid,
            "model_name": model_name,
            "tool_parser": req.tool_parser,
            "base_url": state.base_url,
            "created_at": state.created_at,
        }

    @app.get("/sessions")
    async def list_sessions():
        rows = []
        for s in sessions.values():
            nodes = s.managed_server.get_state()
            rows.append(
                {
                    "uuid": s.uuid,
                    "model_name": s.model_name,
                    "base_url": s.base_url,
                    "created_at": s.created_at,
                    "last_accessed": s.last_accessed,
                    "num_nodes": len(nodes.get("nodes", nodes.get("sequences", {}))),
                }
            )
        return {"sessions": rows}

    @app.post("/{session_uuid}/v1/chat/completions")
    async def chat(session_uuid: str, req: ChatCompletionProxyRequest):
        s = session_of(session_uuid)
        if not req.messages:
            return openai_error(400, "messages must not be empty")
        msgs = s.translator.convert_messages_for_template(
            [m.model_dump(exclude_none=True) for m in req.messages]
        )
        kwargs: dict[str, Any] = {"n": req.n, "max_tokens": req.max_tokens}
        kwargs["temperature"] = req.temperature
        if req.stop:
            kwargs["stop"] = req.stop
        if req.tools and isinstance(s.managed_server, ManagedServer):
            kwargs["chat_template_kwargs"] = {"tools": req.tools}
        try:
            result = await s.managed_server.chat_completion(messages=msgs, **kwargs)
        except Exception as e:
            logger.exception("proxy completion failed")
            return openai_error(500, f"Completion failed: {e}", error_type="server_error")
        choices = []
        for ch in result.choices:
            reply = s.translator.parse_reply(ch.message.content or "", req.tool_choice, req.tools)
            finish = reply.finish_reason if reply.calls else ch.finish_reason
            choice = openai_choice("chat.completion", ch.index, reply.content, finish)
            if reply.calls:
                choice["message"]["tool_calls"] = [c.model_dump() for c in reply.calls]
            if reply.errors:
                for err in reply.errors:
                    s.managed_server.stats.tool_parse_error(err.kind, err.raw)
                choice["message"]["tool_call_errors"] = [
                    {"index": err.index, "kind": err.kind, "error": err.message, "raw": err.raw}
                    for err in reply.errors
                ]
            choices.append(choice)
        return openai_response("chat.completion", model_name, choices)

    @app.post("/{session_uuid}/v1/chat/completions/render")
    async def render_prompt(session_uuid: str, req: ChatCompletionProxyRequest):
        s = session_of(session_uuid)
        try:
            text = render(req.messages, req.tools, s.translator)
        except Exception as e:
            return openai_error(400, f"Failed to render prompt: {e}")
        ids = list(tokenizer.encode(text, add_special_tokens=False))
        return {"prompt_text": text, "token_ids": ids, "num_tokens": len(ids)}

    @app.get("/{session_uuid}/nodes")
    async def nodes(session_uuid: str):
        state = session_of(session_uuid).managed_server.get_state()
        found = state.get("nodes") or list((state.get("sequences") or {}).values())
        return {"nodes": [n.model_dump() for n in found]}

    @app.delete("/{session_uuid}")
    async def delete(session_uuid: str):
        session_of(session_uuid)
        del sessions[session_uuid]
        return {"status": "deleted", "uuid": session_uuid}

    return app


__all__ = ["ChatCompletionProxyRequest", "SessionCreateRequest", "create_app", "openai_error"]
