"""``FaultBarrier``: the ASGI middleware that turns a server fault into one logged 500 answer.

Starlette answers an unhandled exception from its outermost middleware and then re-raises it, so
the server logs it a second time and closes the connection: the client's next pooled request
fails, and one fault costs two tracebacks. Installed inside that layer (``app.add_middleware``),
the barrier catches the exception first, logs it once with its traceback, sends the app's own 500
body (``render``) and returns normally, so the connection stays open. A fault after the answer
started (a stream) can only be logged; the answer is then cut short.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]
Render = Callable[[BaseException], bytes]
"""The JSON body of the 500 answer for an exception (the app's error shape)."""


class FaultBarrier:
    """ASGI middleware: an exception from ``app`` becomes a 500 with ``render(exc)`` as its JSON body,
    logged once on ``logger`` with its traceback; ``on_fault`` (if given) is told of each one."""

    def __init__(
        self,
        app: ASGIApp,
        render: Render,
        logger: logging.Logger,
        on_fault: Callable[[BaseException], None] = lambda exc: None,
    ) -> None:
        self.app = app
        self.render = render
        self.logger = logger
        self.on_fault = on_fault

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = False

        async def tracking_send(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, receive, tracking_send)
        except Exception as exc:  # noqa: BLE001 - the barrier's whole job
            self.logger.exception("%s %s failed", scope.get("method"), scope.get("path"))
            self.on_fault(exc)
            if started:
                return  # the answer is under way: nothing but cutting it short is left
            body = self.render(exc)
            headers = [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
            ]
            await send({"type": "http.response.start", "status": 500, "headers": headers})
            await send({"type": "http.response.body", "body": body, "more_body": False})


__all__ = ["FaultBarrier", "Render"]
