"""The proxy's errors: OpenAI's ``{"error": {"message", "type", "code"}}`` body, for a route's own
refusals (``HTTPException``) and for a body that does not validate (422 naming the first field)."""

from __future__ import annotations

from fastapi import FastAPI, HTTPException, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse


def openai_error(
    status_code: int, message: str, error_type: str = "invalid_request_error"
) -> JSONResponse:
    """The error answer with ``status_code``."""
    body = {"error": {"message": message, "type": error_type, "code": status_code}}
    return JSONResponse(status_code=status_code, content=body)


def install_error_handlers(app: FastAPI) -> None:
    """Answer ``HTTPException`` and validation errors in the error body above."""

    @app.exception_handler(HTTPException)
    async def _http_error(_: Request, exc: HTTPException) -> JSONResponse:
        return openai_error(exc.status_code, str(exc.detail))

    @app.exception_handler(RequestValidationError)
    async def _bad_body(_: Request, exc: RequestValidationError) -> JSONResponse:
        first = exc.errors()[0] if exc.errors() else {}
        where = ".".join(str(p) for p in first.get("loc", ()))
        return openai_error(422, f"{where}: {first.get('msg', 'invalid request')}")


__all__ = ["install_error_handlers", "openai_error"]
