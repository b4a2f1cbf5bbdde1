"""The answers each proxy route declares in its OpenAPI schema: exactly the status codes it gives,
errors in OpenAI's body (``ErrorBody``). A body that does not validate is a 400 here (OpenAI's and
vLLM's answer), so ``openapi.proxy_openapi`` takes FastAPI's default 422 out of every route."""

from __future__ import annotations

from typing import Any, Optional

from pydantic import BaseModel

_WHY = {
    400: "A field the proxy cannot serve or a body that does not validate (the message names it)",
    401: "Missing or wrong API key (when the proxy has one)",
    404: "No such session (or server, or model)",
    409: "A token drift in a session that drops drifted episodes",
    429: "The proxy holds its most open sessions (--max-sessions)",
    502: "The inference server behind the proxy failed or is misconfigured",
}


class ErrorDetail(BaseModel):
    message: str
    type: str
    param: Optional[str] = None
    code: int


class ErrorBody(BaseModel):
    """OpenAI's error body."""

    error: ErrorDetail


def errors(*codes: int) -> dict[int | str, dict[str, Any]]:
    """The ``responses`` entries of these error ``codes``."""
    return {code: {"model": ErrorBody, "description": _WHY[code]} for code in codes}


JSON_OR_EVENTS: dict[int | str, dict[str, Any]] = {
    200: {
        "description": "The chat completion (JSON), or its chunks as server-sent events "
        "(stream: true)",
        "content": {
            "application/json": {"schema": {"type": "object"}},
            "text/event-stream": {"schema": {"type": "string"}},
        },
    }
}
KEYED = errors(401)
SESSION = errors(401, 404)
CREATE_RESPONSES = errors(400, 401, 404, 429)
CHAT_RESPONSES = {**JSON_OR_EVENTS, **errors(400, 401, 404, 409, 502)}
RENDER_RESPONSES = errors(400, 401, 404)

__all__ = [
    "CHAT_RESPONSES",
    "CREATE_RESPONSES",
    "ErrorBody",
    "ErrorDetail",
    "KEYED",
    "RENDER_RESPONSES",
    "SESSION",
    "errors",
]
