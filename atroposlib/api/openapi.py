"""What the trajectory API's OpenAPI schema says that FastAPI cannot see: the request bodies.

The ingest and registration routes read their bodies by hand (orjson, one strict validation, the
received bytes stored as they are: see ``routes/ingest.py``), so FastAPI sees no body parameter
and would declare none. Each such route names its body with ``request_body(Model)`` as its
``openapi_extra``; ``install_openapi(app)`` puts those models into the schema's components, so a
schema-driven client or fuzzer sends the bodies the server really takes, and nothing is parsed
twice at run time.
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi
from pydantic import BaseModel
from pydantic.json_schema import models_json_schema

REF = "#/components/schemas/{model}"
_BODY_MODELS: dict[str, type[BaseModel]] = {}  # filled by request_body, at import of the routers


def request_body(
    model: type[BaseModel], *, many: bool = False, required: bool = True, what: str = ""
) -> dict[str, Any]:
    """``openapi_extra`` of a route whose body is ``model`` (a JSON list of them with ``many``)."""
    _BODY_MODELS[model.__name__] = model
    ref: dict[str, Any] = {"$ref": REF.format(model=model.__name__)}
    schema = {"type": "array", "items": ref} if many else ref
    body: dict[str, Any] = {
        "required": required,
        "content": {"application/json": {"schema": schema}},
    }
    if what:
        body["description"] = what
    return {"requestBody": body}


def schema_with_bodies(app: FastAPI) -> dict[str, Any]:
    """The app's generated schema plus the components its ``request_body`` routes refer to."""
    schema = get_openapi(
        title=app.title, version=app.version, routes=app.routes, description=app.description
    )
    _, defs = models_json_schema(
        [(m, "validation") for m in _BODY_MODELS.values()], ref_template=REF
    )
    components = schema.setdefault("components", {}).setdefault("schemas", {})
    for name, body_schema in defs.get("$defs", {}).items():
        components.setdefault(name, body_schema)
    _errors_as_json(schema)
    return schema


def _errors_as_json(schema: dict[str, Any]) -> None:
    """FastAPI files a route's declared error answers under the route's own media type; a
    plain-text route (``/metrics``) still answers its errors as ``ErrorResponse`` JSON."""
    for operations in schema.get("paths", {}).values():
        for operation in operations.values():
            for status, answer in operation.get("responses", {}).items():
                content = answer.get("content", {})
                if status.startswith(("4", "5")) and "text/plain" in content:
                    content["application/json"] = content.pop("text/plain")


def install_openapi(app: FastAPI) -> None:
    """Make ``app.openapi()`` return ``schema_with_bodies`` (built once, then cached)."""

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            app.openapi_schema = schema_with_bodies(app)
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]


__all__ = ["install_openapi", "request_body", "schema_with_bodies"]
