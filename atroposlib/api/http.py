"""HTTP plumbing shared by the routers: bounded (and gunzipped) request bodies, orjson responses,
error responses (``ErrorResponse``), the bearer-token check, and validation-error messages.
"""

from __future__ import annotations

import hmac
import logging
import zlib
from typing import Any, Optional

import orjson
from fastapi import Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import Response
from pydantic import BaseModel, ValidationError
from starlette.requests import ClientDisconnect

from atroposlib.errors import ApiProblem  # defined with the package's other errors

logger = logging.getLogger("atroposlib.api")


def problem_response(p: ApiProblem) -> Response:
    body = orjson.dumps({"error": p.error, "detail": p.detail})
    return Response(
        body, status_code=p.status_code, media_type="application/json", headers=p.headers
    )


def to_json(payload: Any) -> bytes:
    """The JSON of an answer: bytes are sent as they are (pre-serialised payloads), a wire model
    as the fields its service method set (``exclude_unset``: optional fields it left out are
    absent, as in Atropos's answers), anything else with orjson."""
    if isinstance(payload, (bytes, bytearray)):
        return bytes(payload)
    if isinstance(payload, BaseModel):
        return payload.__pydantic_serializer__.to_json(payload, exclude_unset=True)
    return orjson.dumps(payload)


def json_response(request: Request, payload: Any, status_code: int = 200) -> Response:
    """Serialize with ``to_json``; gzip when large and the client accepts it."""
    body = to_json(payload)
    headers: dict[str, str] = {}
    settings = request.app.state.settings
    if len(body) >= settings.gzip_min_bytes and "gzip" in request.headers.get(
        "accept-encoding", ""
    ):
        compressor = zlib.compressobj(settings.gzip_level, zlib.DEFLATED, 31)
        body = compressor.compress(body) + compressor.flush()
        headers["Content-Encoding"] = "gzip"
        headers["Vary"] = "Accept-Encoding"
    return Response(
        bytes(body), status_code=status_code, media_type="application/json", headers=headers
    )


class PartsResponse(Response):
    """A JSON body sent as the given pieces, in order, without joining them first (large batches
    are sent straight from the stored payloads; the length is known, so no chunked encoding)."""

    media_type = "application/json"

    def __init__(
        self, parts: list[bytes], status_code: int = 200, headers: Optional[dict[str, str]] = None
    ) -> None:
        self.parts = [p for p in parts if p]
        super().__init__(None, status_code=status_code, headers=headers)
        self.headers["content-length"] = str(sum(len(p) for p in self.parts))

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        await send(
            {"type": "http.response.start", "status": self.status_code, "headers": self.raw_headers}
        )
        last = len(self.parts) - 1
        if last < 0:
            await send({"type": "http.response.body", "body": b"", "more_body": False})
        for i, part in enumerate(self.parts):
            await send({"type": "http.response.body", "body": part, "more_body": i < last})


async def read_body(request: Request) -> bytes:
    """The request body, gunzipped if ``Content-Encoding: gzip``; 413 beyond the configured limits.

    The compressed size is capped while streaming, and decompression is streamed with a cap on the
    output, so a gzip bomb is refused after at most ``max_decompressed_bytes`` of work.
    """
    settings = request.app.state.settings
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > settings.max_body_bytes:
        raise ApiProblem(
            413, f"request body of {declared} bytes exceeds the limit of {settings.max_body_bytes}"
        )
    chunks = []
    size = 0
    try:
        async for chunk in request.stream():
            size += len(chunk)
            if size > settings.max_body_bytes:
                raise ApiProblem(
                    413, f"request body exceeds the limit of {settings.max_body_bytes} bytes"
                )
            chunks.append(chunk)
    except ClientDisconnect:
        raise ApiProblem(400, "client disconnected before sending the whole body") from None
    raw = b"".join(chunks)
    encoding = request.headers.get("content-encoding", "").strip().lower()
    if not encoding or encoding == "identity":
        return raw
    if encoding not in ("gzip", "x-gzip"):
        raise ApiProblem(415, f"unsupported Content-Encoding {encoding!r}; use gzip or none")
    if len(raw) < 64 * 1024:
        return gunzip_bounded(raw, settings.max_decompressed_bytes)
    # zlib releases the GIL while inflating: in a thread, a large body (or a gzip bomb, refused
    # at max_decompressed_bytes) does not hold up the event loop
    return await run_in_threadpool(gunzip_bounded, raw, settings.max_decompressed_bytes)


def gunzip_bounded(raw: bytes, limit: int) -> bytes:
    """Decompress gzip ``raw`` producing at most ``limit`` bytes (413 beyond, 400 if corrupt)."""
    d = zlib.decompressobj(wbits=47)  # gzip or zlib header, auto-detected
    out = []
    produced = 0
    data = raw
    try:
        while True:
            piece = d.decompress(data, 1 << 20)
            produced += len(piece)
            if produced > limit:
                raise ApiProblem(
                    413, f"decompressed request body exceeds the limit of {limit} bytes"
                )
            out.append(piece)
            data = d.unconsumed_tail
            if d.eof:
                if d.unused_data:
                    # concatenated gzip members: continue with the next member
                    data = d.unused_data
                    d = zlib.decompressobj(wbits=47)
                    continue
                break
            if not data:
                tail = d.flush()
                produced += len(tail)
                if produced > limit:
                    raise ApiProblem(
                        413, f"decompressed request body exceeds the limit of {limit} bytes"
                    )
                out.append(tail)
                if not d.eof:
                    raise ApiProblem(400, "truncated gzip request body")
                break
    except zlib.error as e:
        raise ApiProblem(400, f"invalid gzip request body: {e}") from None
    return b"".join(out)


def parse_json(body: bytes) -> Any:
    """orjson parse; NaN/Infinity literals (which Python's json writes) fall back to the stdlib parser
    so that validation can name the offending field instead of a bare syntax error."""
    if not body:
        raise ApiProblem(422, "request body is empty; a JSON document is required")
    try:
        return orjson.loads(body)
    except orjson.JSONDecodeError as e:
        import json

        try:
            return json.loads(body)
        except (ValueError, UnicodeDecodeError):
            raise ApiProblem(422, f"request body is not valid JSON: {e}") from None
        except RecursionError:
            raise ApiProblem(422, "request body is nested too deeply") from None


def parse_json_exact(body: bytes) -> tuple[Any, bool]:
    """``parse_json`` and whether ``body`` itself is deliverable as stored: False when only the
    lenient stdlib parser could read it (NaN literals, lone UTF-16 surrogates such as ``"\\ud83d"``,
    which orjson, and so every trainer, refuses). Then the data has its lone surrogates replaced by
    U+FFFD and must be stored re-serialized, never as received."""
    if not body:
        raise ApiProblem(422, "request body is empty; a JSON document is required")
    try:
        return orjson.loads(body), True
    except orjson.JSONDecodeError as e:
        first = e
    if "recursion" in str(first).lower():
        raise ApiProblem(422, f"request body is nested too deeply: {first}")
    data = parse_json(body)
    return replace_lone_surrogates(data), False


def replace_lone_surrogates(data: Any) -> Any:
    """``data`` with every str holding a lone surrogate repaired (U+FFFD); iterative, any depth."""

    def fix(v: str) -> str:
        return v.encode("utf-16", "surrogatepass").decode("utf-16", "replace")

    def bad(v: Any) -> bool:
        if not isinstance(v, str):
            return False
        try:
            v.encode("utf-8")
            return False
        except UnicodeEncodeError:
            return True

    if isinstance(data, str):
        return fix(data) if bad(data) else data
    stack = [data]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            for k in list(node):
                v = node[k]
                if bad(k):
                    del node[k]
                    k = fix(k)
                    node[k] = v
                if bad(v):
                    node[k] = fix(v)
                elif isinstance(v, (dict, list)):
                    stack.append(v)
        elif isinstance(node, list):
            for i, v in enumerate(node):
                if bad(v):
                    node[i] = fix(v)
                elif isinstance(v, (dict, list)):
                    stack.append(v)
    return data


def validation_problem(e: ValidationError, prefix: str = "") -> ApiProblem:
    """422 naming the field and index of each error (the schema's own messages)."""
    errors = []
    for err in e.errors(include_url=False, include_input=False):
        loc = prefix
        for part in err["loc"]:
            loc += f"[{part}]" if isinstance(part, int) else (f".{part}" if loc else str(part))
        msg = err["msg"]
        if msg.startswith("Value error, "):
            msg = msg[len("Value error, ") :]
        errors.append(f"{loc}: {msg}" if loc else msg)
    summary = "; ".join(errors[:5]) + (f" (+{len(errors) - 5} more)" if len(errors) > 5 else "")
    return ApiProblem(422, f"invalid request: {summary}", detail=errors)


async def check_token(request: Request) -> None:
    """FastAPI dependency: 401 unless the configured bearer token is presented (a coroutine, so
    that FastAPI does not send it to its thread pool)."""
    token = request.app.state.settings.api_token
    if not token:
        return
    header = request.headers.get("authorization", "")
    scheme, _, given = header.partition(" ")
    if scheme.lower() != "bearer" or not hmac.compare_digest(
        given.strip().encode(), token.encode()
    ):
        raise ApiProblem(
            401,
            "missing or wrong bearer token (send 'Authorization: Bearer <token>')",
            headers={"WWW-Authenticate": "Bearer"},
        )


__all__ = [
    "ApiProblem",
    "PartsResponse",
    "check_token",
    "gunzip_bounded",
    "json_response",
    "parse_json",
    "parse_json_exact",
    "replace_lone_surrogates",
    "problem_response",
    "read_body",
    "to_json",
    "validation_problem",
]
