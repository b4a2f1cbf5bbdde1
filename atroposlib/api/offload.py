"""Heavy work on large request bodies, kept off the event loop.

orjson and pydantic hold the GIL while they parse and validate, so a worker *thread* does not keep
the server responsive during a 100 MB group (measured: every other request waited seconds).
Bodies of at least ``ApiSettings.offload_min_bytes`` are therefore parsed and validated in a child
process (forked from a preloaded fork server, one at a time so that the memory a huge parse needs
is bounded to one body's worth, and a fresh child per body so that memory goes back to the system);
the event loop only awaits the answer. gzip is inflated in a worker thread (zlib releases the GIL).
Smaller bodies stay on the loop, where they cost a few ms and a process hop would cost more.

An ``ApiProblem`` raised in the child (a 422 naming the field) comes back as the same ``ApiProblem``.
"""

from __future__ import annotations

import asyncio
import logging
import multiprocessing
import os
import tempfile
import threading
from collections.abc import Callable
from typing import Any, Optional

from fastapi.concurrency import run_in_threadpool

from atroposlib.api.http import ApiProblem
from atroposlib.api.wire import null_members

logger = logging.getLogger("atroposlib.api")

PRELOAD = ["atroposlib.api.routes.ingest"]


def _with_body_from(path: str, fn: Callable[[bytes], Any]) -> Any:
    """Runs in the child: ``fn(body)`` with the body read from the file the server wrote."""
    with open(path, "rb") as f:
        return fn(f.read())


def _run_catching(fn: Callable[..., Any], args: tuple[Any, ...]) -> tuple[Any, ...]:
    """Runs in the child: ``("ok", result)`` or ``("problem", status, error, detail)``."""
    try:
        return ("ok", fn(*args))
    except ApiProblem as p:
        return ("problem", p.status_code, p.error, p.detail)
    except RecursionError:
        return ("problem", 422, "request body is nested too deeply", None)


def _child_main(conn: Any, fn: Callable[..., Any], args: tuple[Any, ...]) -> None:
    """Entry point of the child: one job, its answer through ``conn``, then exit."""
    try:
        answer = _run_catching(fn, args)
        try:
            conn.send(answer)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the server that asked was killed: nobody to answer, and no traceback in its log
    finally:
        conn.close()


class BodyOffload:
    """Runs a body's parse + validation in a child process, one body at a time.

    Each body gets a fresh child forked from the fork server and gone when it has answered, so no
    idle worker outlives the server: when ``run-api`` dies (even by SIGKILL) the fork server sees
    its pipe close and exits once no child is left.
    """

    def __init__(self) -> None:
        self._ctx: Any = None
        self._lock: Optional[asyncio.Lock] = None

    def _context(self) -> Any:
        if self._ctx is None:
            ctx = multiprocessing.get_context("forkserver")
            ctx.set_forkserver_preload(PRELOAD)
            self._ctx = ctx
        return self._ctx

    def _run_sync(self, fn: Callable[..., Any], args: tuple[Any, ...]) -> tuple[Any, ...]:
        # starting the fork server or forking a child happens here, in a worker thread, never on
        # the event loop
        ctx = self._context()
        reader, writer = ctx.Pipe(duplex=False)
        child = ctx.Process(target=_child_main, args=(writer, fn, args), daemon=True)
        child.start()
        writer.close()  # the child holds the only write end: its death is our EOF
        try:
            answer: tuple[Any, ...] = reader.recv()
            return answer
        except EOFError:
            child.join(5)
            raise ChildDied(child.exitcode) from None
        finally:
            reader.close()
            child.join(30)

    def warm(self) -> None:
        """Start the fork server (it imports the ingest code once) ahead of the first large body."""
        self._run_sync(int, ())

    def _run_on_body(self, fn: Callable[[bytes], Any], body: bytes) -> tuple[Any, ...]:
        # the body goes to the child through a file: writing it releases the GIL, whereas
        # pickling it into the pipe copies 100 MB under the GIL (measured ~130 ms here)
        fd, path = tempfile.mkstemp(prefix="atropos-body-")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(body)
            return self._run_sync(_with_body_from, (path, fn))
        finally:
            os.unlink(path)

    async def run_on_file(self, fn: Callable[[bytes], Any], path: str) -> Any:
        """``fn(body)`` in the child, the body read there from ``path``."""
        return await self._run_locked(self._run_sync, _with_body_from, (path, fn))

    async def run(self, fn: Callable[[bytes], Any], body: bytes) -> Any:
        """``fn(body)`` in the child; its ``ApiProblem`` is raised here."""
        return await self._run_locked(self._run_on_body, fn, body)

    async def _run_locked(self, call: Callable[..., tuple[Any, ...]], *args: Any) -> Any:
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:  # one large body at a time: bounded memory, others wait here
            try:
                out = await run_in_threadpool(call, *args)
            except ChildDied as e:  # e.g. killed for memory: say so, retryable
                raise ApiProblem(
                    503,
                    f"the worker parsing a large body died (exit code {e.exitcode}; out of "
                    "memory?); retry later",
                    headers={"Retry-After": "5"},
                ) from None
        if out[0] == "problem":
            raise ApiProblem(out[1], out[2], out[3])
        return out[1]

    def warm_in_background(self) -> None:
        threading.Thread(target=self._warm_quietly, name="offload-warm", daemon=True).start()

    def _warm_quietly(self) -> None:
        try:
            self.warm()
        except Exception as e:  # pragma: no cover - the first large body would then start it
            logger.warning("could not start the large-body worker ahead of time: %s", e)

    def close(self) -> None:
        """Nothing to stop: children exit after their job, the fork server with the server."""


# Internal: raised and caught in this module (it leaves as an ApiProblem 503).
class ChildDied(Exception):
    def __init__(self, exitcode: Optional[int]) -> None:
        super().__init__(f"child exited with {exitcode}")
        self.exitcode = exitcode


async def receive_to_file(request: Any, limit: int) -> str:
    """Stream an (uncompressed) request body into a temporary file, 413 beyond ``limit``; the
    caller unlinks it. No copy of the whole body is ever made under the GIL (joining 100 MB of
    chunks took ~140 ms of event loop here)."""
    from starlette.requests import ClientDisconnect

    fd, path = tempfile.mkstemp(prefix="atropos-body-")
    size = 0
    try:
        with os.fdopen(fd, "wb", buffering=0) as f:
            async for chunk in request.stream():
                size += len(chunk)
                if size > limit:
                    raise ApiProblem(413, f"request body exceeds the limit of {limit} bytes")
                f.write(chunk)
    except ClientDisconnect:
        os.unlink(path)
        raise ApiProblem(400, "client disconnected before sending the whole body") from None
    except BaseException:
        os.unlink(path)
        raise
    if size == 0:
        os.unlink(path)
        raise ApiProblem(422, "request body is empty; a JSON document is required")
    return path


def read_with_null_keys(path: str, missing: list[str]) -> bytes:
    """The JSON object in ``path`` with ``missing`` keys appended as nulls, read back as bytes
    (file operations and one read: the GIL is released while the data moves)."""
    with open(path, "r+b") as f:
        if missing:
            end = f.seek(0, os.SEEK_END)
            f.seek(max(0, end - 4096))
            tail = f.read()
            cut = len(tail.rstrip()) - 1  # the closing brace
            f.seek(end - len(tail) + cut)
            f.truncate()
            f.write(b"," + null_members(missing) + b"}")
            f.flush()
        f.seek(0)
        return f.read()


__all__ = ["BodyOffload", "read_with_null_keys", "receive_to_file"]
