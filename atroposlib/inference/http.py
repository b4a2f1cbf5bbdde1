"""The engine's HTTP errors and key: ``BadRequest``, the OpenAI-shaped error body every route answers
with, and the API-key check.

Errors are ``{"error": {"message", "type", "param", "code"}}``: 400 for bad parameters (validation
included: OpenAI's and vLLM's status, not FastAPI's 422), 401 for a missing or wrong key, 404 for an
unknown model or adapter, 503 when the generation queue is full, 500 for a fault (a request whose
rows failed in the batch, or anything unhandled: ``fault_body``, sent by the ``FaultBarrier``).
Messages are made writable (a lone surrogate from a request becomes U+FFFD), so no error answer
can fail to serialize.
"""

from __future__ import annotations

import hmac
import re
from typing import Any, Optional

from fastapi import FastAPI, Request, Security
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from starlette.exceptions import HTTPException as StarletteHTTPException

from atroposlib.errors import BadRequest, InferenceError, InferenceUnavailable  # defined there

_FIELD = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$|^[0-9]+$")


class GenerationFailed(InferenceError):
    """Internal: the rows of one request failed inside the engine's batch (logged there, with the
    traceback); that request alone is answered 500."""


class Unauthorized(InferenceError):
    """Internal: a request without the engine's API key (answered 401)."""


def _writable(text: str) -> str:
    return text.encode("utf-8", "replace").decode("utf-8")


def error_body(
    status: int, message: str, param: Optional[str] = None, kind: str = "BadRequestError"
) -> dict[str, Any]:
    """The OpenAI error object."""
    shown = _writable(param) if param is not None else None
    return {"error": {"message": _writable(message), "type": kind, "param": shown, "code": status}}


def error_response(
    status: int,
    message: str,
    param: Optional[str] = None,
    kind: str = "BadRequestError",
    headers: Optional[dict[str, str]] = None,
) -> JSONResponse:
    """The OpenAI error body with ``status``."""
    return JSONResponse(
        status_code=status, content=error_body(status, message, param, kind), headers=headers
    )


def fault_body(exc: BaseException) -> bytes:
    """The 500 answer of an unhandled fault (the ``FaultBarrier``'s render)."""
    body = error_body(500, f"internal error: {type(exc).__name__}", None, "InternalServerError")
    return bytes(JSONResponse(content=body).body)


def _param(loc: Any) -> Optional[str]:
    """The field a validation error is about: its location's field names and indexes, up to the
    first of pydantic's own tags (``function-after[...]``, ``list[int]``)."""
    parts: list[str] = []
    for p in loc:
        text = str(p)
        if p == "body" and not parts:
            continue
        if not _FIELD.match(text) or text in ("str", "int", "float", "bool"):
            break
        parts.append(text)
    return ".".join(parts) or None


BEARER = HTTPBearer(
    auto_error=False,
    description="The engine's API key (ATROPOS_ENGINE_API_KEY or --api-key), as "
    "'Authorization: Bearer KEY' (the openai client's api_key)",
)


async def require_api_key(
    request: Request, _declared: Optional[HTTPAuthorizationCredentials] = Security(BEARER)
) -> None:
    """FastAPI dependency of every route but ``/health`` when the engine has a key: 401 unless the
    request carries it (compared in constant time). ``BEARER`` declares the scheme in the schema."""
    key: Optional[str] = request.app.state.served.config.api_key
    if not key:
        return
    scheme, _, given = request.headers.get("authorization", "").partition(" ")
    if scheme.lower() != "bearer" or not hmac.compare_digest(given.strip().encode(), key.encode()):
        raise Unauthorized("missing or wrong API key (send 'Authorization: Bearer <key>')")


def install_error_handlers(app: FastAPI) -> None:
    """Answer validation errors, ``BadRequest``, a missing key, a full queue, Starlette's own errors
    and a failed generation in the OpenAI error shape."""

    @app.exception_handler(RequestValidationError)
    async def _validation(_: Request, exc: RequestValidationError) -> JSONResponse:
        errs = exc.errors()
        first = errs[0] if errs else {}
        param = _param(first.get("loc", []))
        msg = str(first.get("msg", "invalid")).removeprefix("Value error, ")
        return error_response(400, f"invalid parameter {param}: {msg}", param)

    @app.exception_handler(BadRequest)
    async def _bad(_: Request, exc: BadRequest) -> JSONResponse:
        msg = exc.message
        if exc.param and exc.param not in msg:
            msg = f"{exc.param}: {msg}"
        kind = "NotFoundError" if exc.status == 404 else "BadRequestError"
        return error_response(exc.status, msg, exc.param, kind)

    @app.exception_handler(Unauthorized)
    async def _unauthorized(_: Request, exc: Unauthorized) -> JSONResponse:
        return error_response(
            401, str(exc), None, "AuthenticationError", headers={"WWW-Authenticate": "Bearer"}
        )

    @app.exception_handler(InferenceUnavailable)
    async def _busy(_: Request, exc: InferenceUnavailable) -> JSONResponse:
        return error_response(503, str(exc), None, "ServiceUnavailableError")

    @app.exception_handler(StarletteHTTPException)
    async def _http(_: Request, exc: StarletteHTTPException) -> JSONResponse:
        """Starlette's own answers (a body that is not JSON, an unknown path, a wrong method)."""
        kinds = {400: "BadRequestError", 404: "NotFoundError", 405: "MethodNotAllowedError"}
        headers = dict(exc.headers) if exc.headers else None  # a 405 keeps its ``Allow``
        return error_response(
            exc.status_code, str(exc.detail), None, kinds.get(exc.status_code, "Error"), headers
        )

    @app.exception_handler(GenerationFailed)
    async def _failed(_: Request, exc: GenerationFailed) -> JSONResponse:
        return error_response(500, str(exc), None, "InternalServerError")


__all__ = [
    "BEARER",
    "BadRequest",
    "error_body",
    "error_response",
    "fault_body",
    "install_error_handlers",
    "require_api_key",
]
