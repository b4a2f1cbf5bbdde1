"""The proxy's key: with ``ProxySettings.api_key`` set, every route but ``GET /health`` needs
``Authorization: Bearer <key>`` (what an OpenAI client sends as its ``api_key``), as run-api's token
and vLLM's ``--api-key`` work; a wrong or missing key is a 401, compared in constant time."""

from __future__ import annotations

import hmac

from fastapi import Request

from atroposlib.inference_clients.proxy.http import refuse

BEARER_HINT = "missing or wrong API key (send 'Authorization: Bearer <key>', the client's api_key)"


def key_matches(header: str, key: str) -> bool:
    """Whether an ``Authorization`` header carries ``key`` as a bearer token."""
    scheme, _, given = header.partition(" ")
    return scheme.lower() == "bearer" and hmac.compare_digest(given.strip().encode(), key.encode())


async def require_key(request: Request) -> None:
    """FastAPI dependency: 401 unless the configured key is presented (a coroutine: no thread)."""
    key = request.app.state.proxy.settings.api_key
    if not key:
        return
    if not key_matches(request.headers.get("authorization", ""), key):
        exc = refuse(401, BEARER_HINT)
        exc.headers = {"WWW-Authenticate": "Bearer"}
        raise exc


__all__ = ["BEARER_HINT", "key_matches", "require_key"]
