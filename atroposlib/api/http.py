"""HTTP plumbing shared by the routers: bounded (and gunzipped) request bodies, orjson responses,
error responses (``ErrorResponse``), the bearer-token check, and validation-error messages. (Parsing
a body as JSON is ``body_json``'s; its functions are re-exported here.)
"""

from __future__ import annotations

import hmac
import logging
import zlib
from typing import Any, Optional

import orjson
from fastapi import Request, Security
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import Response
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from pydantic import BaseModel, ValidationError
from starlette.requests import ClientDisconnect

from atroposlib.api.body_json import parse_json, parse_json_exact, replace_lone_surrogates
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
    inflater = BoundedGunzip(raw, settings.max_decompressed_bytes)
    if not inflater.run(budget=LOOP_INFLATE_BYTES):
        # more to inflate: a small body can still be a bomb (64 KiB -> 64 MiB). zlib releases the
        # GIL while inflating, so in a thread it does not hold up the event loop
        await run_in_threadpool(inflater.run)
    return inflater.result()


LOOP_INFLATE_BYTES = 1 << 20
"""How much of a gzip body is inflated on the event loop (~1 ms): a small body costs no thread hop,
anything larger goes on in a worker thread."""


class BoundedGunzip:
    """Decompress a gzip (or zlib) body into at most ``limit`` bytes (413 beyond, 400 if corrupt),
    in as many ``run`` calls as the caller likes; concatenated gzip members are read one after the
    other."""

    def __init__(self, raw: bytes, limit: int) -> None:
        self.limit = limit
        self._d = zlib.decompressobj(wbits=47)  # gzip or zlib header, auto-detected
        self._data = raw
        self._out: list[bytes] = []
        self._produced = 0
        self.done = False

    def run(self, budget: Optional[int] = None) -> bool:
        """Inflate until done or ``budget`` more bytes came out (None: no budget); True when done."""
        start = self._produced
        try:
            while not self.done and (budget is None or self._produced - start < budget):
                self._step()
        except zlib.error as e:
            raise ApiProblem(400, f"invalid gzip request body: {e}") from None
        return self.done

    def result(self) -> bytes:
        return b"".join(self._out)

    def _take(self, piece: bytes) -> None:
        self._produced += len(piece)
        if self._produced > self.limit:
            raise ApiProblem(
                413, f"decompressed request body exceeds the limit of {self.limit} bytes"
            )
        self._out.append(piece)

    def _step(self) -> None:
        d = self._d
        self._take(d.decompress(self._data, 1 << 20))
        self._data = d.unconsumed_tail
        if d.eof:
            if d.unused_data:  # concatenated gzip members: continue with the next member
                self._data = d.unused_data
                self._d = zlib.decompressobj(wbits=47)
            else:
                self.done = True
        elif not self._data:
            self._take(d.flush())
            if not d.eof:
                raise ApiProblem(400, "truncated gzip request body")
            self.done = True


def gunzip_bounded(raw: bytes, limit: int) -> bytes:
    """Decompress gzip ``raw`` producing at most ``limit`` bytes (413 beyond, 400 if corrupt)."""
    inflater = BoundedGunzip(raw, limit)
    inflater.run()
    return inflater.result()


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


BEARER = HTTPBearer(
    auto_error=False,
    description="run-api's token (ATROPOS_API_TOKEN or --api-token), as 'Authorization: Bearer T'",
)


async def check_token(
    request: Request, _declared: Optional[HTTPAuthorizationCredentials] = Security(BEARER)
) -> None:
    """FastAPI dependency: 401 unless the configured bearer token is presented (a coroutine, so
    that FastAPI does not send it to its thread pool). ``BEARER`` declares the scheme in the schema;
    the header is checked here, in constant time."""
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
    "BoundedGunzip",
    "LOOP_INFLATE_BYTES",
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
