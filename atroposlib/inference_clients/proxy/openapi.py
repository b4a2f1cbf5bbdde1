"""The proxy's OpenAPI schema as it really answers: FastAPI's default 422 out of every route (a bad
body is a 400, declared with the other statuses in ``responses.py``), and, when the proxy has a key,
an HTTP bearer security scheme required on every route but ``GET /health`` (without one, no route
declares a 401). A schema-driven client
or fuzzer then calls each route as it must and expects what it gets."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi

OPEN_PATHS = ("/health",)
SCHEME = "bearer"


def proxy_openapi(app: FastAPI, keyed: bool) -> dict[str, Any]:
    """The schema of ``app`` (built once), with a key required where ``keyed``."""
    if app.openapi_schema is not None:
        return app.openapi_schema
    schema = get_openapi(title=app.title, version=app.version, routes=app.routes)
    for path, operations in schema.get("paths", {}).items():
        for operation in operations.values():
            responses = operation.get("responses", {})
            responses.pop("422", None)
            if not keyed:  # no key, no 401
                responses.pop("401", None)
            elif path not in OPEN_PATHS:
                operation["security"] = [{SCHEME: []}]
    components = schema.setdefault("components", {})
    schemas = components.get("schemas", {})
    for unused in ("HTTPValidationError", "ValidationError"):
        schemas.pop(unused, None)
    if keyed:
        components["securitySchemes"] = {SCHEME: {"type": "http", "scheme": "bearer"}}
    app.openapi_schema = schema
    return schema


__all__ = ["OPEN_PATHS", "proxy_openapi"]
