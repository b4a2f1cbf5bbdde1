"""The proxy's errors: OpenAI's ``{"error": {"message", "type", "param", "code"}}`` body for a
route's own refusals (``refuse``), for a body that does not validate (400 naming the first field, as
OpenAI and vLLM answer), and for what the backend answered (``backend_error``: its 4xx kept as that
4xx with its message; its failures a 502). Every refusal is one log line with its reason.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Mapping
from typing import Any, Optional

from fastapi import FastAPI, HTTPException, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from atroposlib.errors import InferenceError, InferenceRejected, TokenDrift
from atroposlib.utils.settings_cli import error_message

logger = logging.getLogger(__name__)

_TYPES = {401: "authentication_error", 404: "not_found_error", 429: "rate_limit_error"}
_BACKEND_MESSAGE = re.compile(r'"message"\s*:\s*"((?:[^"\\]|\\.)*)"')


def type_for_status(status_code: int) -> str:
    """OpenAI's ``type`` for an error with ``status_code``."""
    if status_code >= 500:
        return "server_error"
    return _TYPES.get(status_code, "invalid_request_error")


def openai_error(
    status_code: int,
    message: str,
    error_type: Optional[str] = None,
    param: Optional[str] = None,
    headers: Optional[Mapping[str, str]] = None,
) -> JSONResponse:
    """The error answer with ``status_code``."""
    body = {
        "error": {
            "message": message,
            "type": error_type or type_for_status(status_code),
            "param": param,
            "code": status_code,
        }
    }
    return JSONResponse(status_code=status_code, content=body, headers=headers)


def refuse(status_code: int, message: str, param: Optional[str] = None) -> HTTPException:
    """The exception a route raises to answer ``status_code`` with ``message`` naming ``param``."""
    return HTTPException(status_code, detail={"message": message, "param": param})


def field_path(loc: Any) -> str:
    """A pydantic error location as a client names the field: ``messages[0].content``."""
    out = ""
    for part in loc:
        if part == "body" and not out:
            continue
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _backend_message(text: str) -> str:
    """The backend's own ``message`` inside an ``InferenceRejected`` text, else the text."""
    _, _, body = text.partition(": ")
    found = _BACKEND_MESSAGE.search(body)
    if found is None:
        return text
    try:
        message: str = json.loads(f'"{found.group(1)}"')
    except ValueError:
        return found.group(1)
    return message


def backend_error(e: Exception) -> Optional[HTTPException]:
    """What the client gets for the backend's failure ``e`` (raised by the managed server): a 4xx
    about the request stays that 4xx with the backend's message; a bad key, an unknown model, a
    backend that is down or answers 5xx is a 502 (the proxy's set-up, not the request); a chat
    template that cannot render the messages, or a malformed ``tools`` entry, a 400; a token drift
    in a session that drops drifted episodes, a 409. None for anything else (a fault)."""
    if isinstance(e, InferenceRejected) and not e.permanent:
        return refuse(e.status_code, f"the inference server refused: {_backend_message(str(e))}")
    if isinstance(e, TokenDrift):
        return refuse(409, str(e))
    if isinstance(e, InferenceError):
        return refuse(502, f"the inference server behind the proxy failed: {e}")
    if isinstance(e, ValueError):
        return refuse(400, str(e), "messages" if "template" in str(e) else "tools")
    return None


def _log_refusal(request: Request, status: int, message: str) -> None:
    logger.info("proxy: %s %s -> %d: %s", request.method, request.url.path, status, message)


def install_error_handlers(app: FastAPI) -> None:
    """Answer ``HTTPException`` and validation errors in the error body above, each with one log
    line."""

    # starlette's class: FastAPI raises it too (a body it cannot parse), and ours derives from it
    @app.exception_handler(StarletteHTTPException)
    async def _http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        detail = exc.detail
        message = detail.get("message") if isinstance(detail, dict) else str(detail)
        param = detail.get("param") if isinstance(detail, dict) else None
        _log_refusal(request, exc.status_code, str(message))
        return openai_error(exc.status_code, str(message), param=param, headers=exc.headers)

    @app.exception_handler(RequestValidationError)
    async def _bad_body(request: Request, exc: RequestValidationError) -> JSONResponse:
        first = exc.errors()[0] if exc.errors() else {}
        where = field_path(first.get("loc", ()))
        text = error_message(first) or "invalid request"
        message = f"{where}: {text}" if where and not text.startswith(f"{where}:") else text
        state = getattr(request.app.state, "proxy", None)
        if state is not None:
            state.counts[f"refused:{where or 'body'}"] += 1
        _log_refusal(request, 400, message)
        return openai_error(400, message, param=where or None)


__all__ = [
    "backend_error",
    "field_path",
    "install_error_handlers",
    "openai_error",
    "refuse",
    "type_for_status",
]
