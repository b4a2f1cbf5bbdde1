"""``create_app(server_manager, tokenizer, model_name, settings)``: the managed-server proxy as a
FastAPI app.

External agent code that only speaks OpenAI's chat API creates a session (``POST
/sessions/create``) and points its OpenAI client at ``{proxy}/{uuid}/v1``; every generation is
recorded token-exactly by that session's managed server and can be read back from ``GET
/{uuid}/nodes`` (tokens, masks, logprobs) by the env that owns the session. Tool calls are translated
both ways (see ``tool_call_translator``); blocks that do not parse come back in the message's
``tool_call_errors``. Every session counts into the proxy's ``ServerManager.managed_stats``.
Text-only (``openai``) backends get placeholder logprobs.

Endpoints: ``GET /health``, ``GET /v1/models``, ``GET /servers``, ``POST /sessions/create``,
``GET /sessions``, ``POST /{uuid}/v1/chat/completions`` (JSON or ``stream: true``),
``POST /{uuid}/v1/chat/completions/render``, ``GET /{uuid}/v1/models``, ``GET /{uuid}/nodes``,
``DELETE /{uuid}``. Errors use OpenAI's ``{"error": {...}}`` body; with ``settings.api_key`` every
route but ``/health`` needs it as a bearer token (``auth.py``); sessions are capped and expire
when idle (``sessions.py``); the OpenAPI schema declares the statuses each route answers
(``openapi.py``).

The shape is the trajectory API's: this factory puts the shared ``ProxyState`` on ``app.state``
(routes reach it through ``deps.get_proxy``) and includes one router per concern from ``routes/``.
"""

from __future__ import annotations

from typing import Any, Optional

from fastapi import Depends, FastAPI

from atroposlib.inference_clients.proxy.auth import require_key
from atroposlib.inference_clients.proxy.http import install_error_handlers
from atroposlib.inference_clients.proxy.openapi import proxy_openapi
from atroposlib.inference_clients.proxy.routes import chat, models, sessions, status
from atroposlib.inference_clients.proxy.settings import ProxySettings
from atroposlib.inference_clients.proxy.state import ProxyState
from atroposlib.inference_clients.server_manager import ServerManager


def create_app(
    server_manager: ServerManager,
    tokenizer: Any,
    model_name: str = "unknown",
    settings: Optional[ProxySettings] = None,
    max_model_len: Optional[int] = None,
) -> FastAPI:
    """The proxy app over ``server_manager``'s servers (see the module docstring);
    ``max_model_len`` is the backend's context length, where known (a request without a reply
    budget then gets the rest of it)."""
    settings = settings or ProxySettings()
    app = FastAPI(title="ManagedServer OpenAI proxy")
    app.state.proxy = ProxyState(server_manager, tokenizer, model_name, settings, max_model_len)
    install_error_handlers(app)
    # ``DELETE /{uuid}`` (sessions) also matches ``/health``, ``/servers``, ``/sessions``: it comes
    # after them, so a wrong method on those answers their 405.
    app.include_router(status.router)
    keyed = [Depends(require_key)]
    for module in (models, sessions, chat):
        app.include_router(module.router, dependencies=keyed)
    app.openapi = lambda: proxy_openapi(app, keyed=bool(settings.api_key))  # type: ignore[method-assign]
    return app


__all__ = ["create_app"]
