"""The engine's HTTP errors: ``BadRequest`` and the OpenAI-shaped error body every route answers with.

Errors are ``{"error": {"message", "type", "param", "code"}}``: 400 for bad parameters (validation
included), 404 for an unknown model or adapter, 503 when the generation queue is full.
"""

from __future__ import annotations

from typing import Optional

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse

from atroposlib.errors import BadRequest, InferenceUnavailable  # BadRequest: defined there


def error_response(
    status: int, message: str, param: Optional[str] = None, kind: str = "BadRequestError"
) -> JSONResponse:
    """The OpenAI error body with ``status``."""
    return JSONResponse(
        status_code=status,
        content={"error": {"message": message, "type": kind, "param": param, "code": status}},
    )


def install_error_handlers(app: FastAPI) -> None:
    """Answer validation errors, ``BadRequest`` and a full queue in the OpenAI error shape."""

    @app.exception_handler(RequestValidationError)
    async def _validation(_: Request, exc: RequestValidationError) -> JSONResponse:
        errs = exc.errors()
        first = errs[0] if errs else {}
        loc = [str(p) for p in first.get("loc", []) if p != "body"]
        param = ".".join(loc) or None
        return error_response(
            400, f"invalid parameter {param}: {first.get('msg', 'invalid')}", param
        )

    @app.exception_handler(BadRequest)
    async def _bad(_: Request, exc: BadRequest) -> JSONResponse:
        msg = exc.message
        if exc.param and exc.param not in msg:
            msg = f"{exc.param}: {msg}"
        kind = "NotFoundError" if exc.status == 404 else "BadRequestError"
        return error_response(exc.status, msg, exc.param, kind)

    @app.exception_handler(InferenceUnavailable)
    async def _busy(_: Request, exc: InferenceUnavailable) -> JSONResponse:
        return error_response(503, str(exc), None, "ServiceUnavailableError")


__all__ = ["BadRequest", "error_response", "install_error_handlers"]
