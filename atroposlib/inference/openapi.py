"""The engine's OpenAPI schema says what the engine answers: validation errors are 400s in OpenAI's
error shape (as vLLM and OpenAI answer them), never FastAPI's 422 ``HTTPValidationError``.

FastAPI declares a 422 on every route that takes a body; ``install_openapi(app)`` replaces it with
the 400 the error handlers really send (``OpenAIError``), drops the unused validation schemas, and
files the error answers of plain-text routes under JSON, which is what they are.
The other statuses a route can answer are declared on its router (``ERRORS``, ``errors(...)``).
"""

from __future__ import annotations

from typing import Any, Optional, Union

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi
from pydantic import BaseModel, Field

REF = "#/components/schemas/{model}"


class OpenAIErrorDetail(BaseModel):
    """The ``error`` object of an OpenAI-shaped error answer."""

    message: str
    type: str = Field(description="BadRequestError, NotFoundError, AuthenticationError, ...")
    param: Optional[str] = Field(None, description="The request field at fault, if one is.")
    code: int = Field(description="The HTTP status.")


class OpenAIError(BaseModel):
    """Every error answer of the engine: ``{"error": {"message", "type", "param", "code"}}``."""

    error: OpenAIErrorDetail


_WHAT = {
    400: "an invalid parameter (named in error.param), or a prompt that does not fit",
    401: "missing or wrong API key",
    404: "unknown model or LoRA adapter",
    500: "the request failed inside the engine (logged); other requests are not affected",
    503: "the generation queue is full; retry later",
}


def errors(*codes: int, **shapes: Any) -> dict[Union[int, str], dict[str, Any]]:
    """``responses=`` of a route or router: each status in ``codes`` as an ``OpenAIError``
    (``shapes`` maps a status, as ``s400=Model``, to another model that status may carry too)."""
    out: dict[Union[int, str], dict[str, Any]] = {}
    for code in codes:
        extra = shapes.get(f"s{code}")
        model: Any = Union[OpenAIError, extra] if extra is not None else OpenAIError
        out[code] = {"model": model, "description": _WHAT.get(code, "error")}
    return out


def schema_with_400s(app: FastAPI) -> dict[str, Any]:
    """The generated schema with each route's 422 replaced by its 400 (``OpenAIError``)."""
    schema = get_openapi(
        title=app.title, version=app.version, routes=app.routes, description=app.description
    )
    error_ref = {"$ref": REF.format(model="OpenAIError")}
    for operations in schema.get("paths", {}).values():
        for operation in operations.values():
            responses = operation.get("responses", {})
            if responses.pop("422", None) is not None and "400" not in responses:
                responses["400"] = {
                    "description": _WHAT[400],
                    "content": {"application/json": {"schema": error_ref}},
                }
            for status, answer in responses.items():  # errors are JSON on plain-text routes too
                content = answer.get("content", {})
                if status.startswith(("4", "5")) and "text/plain" in content:
                    content["application/json"] = content.pop("text/plain")
    components = schema.get("components", {}).get("schemas", {})
    for unused in ("HTTPValidationError", "ValidationError"):
        components.pop(unused, None)
    return schema


def install_openapi(app: FastAPI) -> None:
    """Make ``app.openapi()`` (and ``/openapi.json``) return ``schema_with_400s`` (built once)."""

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            app.openapi_schema = schema_with_400s(app)
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]


SSE_EVENT: dict[str, Any] = {
    "type": "object",
    "description": "One server-sent event: its data is a JSON chunk, or [DONE] last.",
    "properties": {"data": {"type": "string"}, "event": {"type": "string"}},
    "required": ["data"],
}
"""The schema of one event of a streamed answer (``text/event-stream``)."""

__all__ = [
    "SSE_EVENT",
    "OpenAIError",
    "OpenAIErrorDetail",
    "errors",
    "install_openapi",
    "schema_with_400s",
]
