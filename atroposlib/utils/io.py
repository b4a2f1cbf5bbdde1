"""HTTP response helper kept under Atropos's name (``atroposlib.utils.io.parse_http_response``)."""

from __future__ import annotations

import inspect
import logging
from typing import Any, Optional

_log = logging.getLogger(__name__)


async def _maybe_await(value: Any) -> Any:
    return await value if inspect.isawaitable(value) else value


async def parse_http_response(resp: Any, logger: Optional[logging.Logger] = None) -> Any:
    """The JSON body of ``resp``; on an HTTP error status, log the status and body, then re-raise.

    Works with aiohttp responses (awaitable ``json()``/``text()``) and httpx responses (plain
    methods/attributes), so env files written for Atropos keep working either way."""
    log = logger or _log
    try:
        resp.raise_for_status()
        return await _maybe_await(resp.json())
    except Exception as e:
        text = getattr(resp, "text", "")
        body = await _maybe_await(text() if callable(text) else text)
        status = getattr(e, "status", None) or getattr(resp, "status", None)
        status = status or getattr(resp, "status_code", "unknown")
        log.error("HTTP request failed: status %s: %s; response body: %.500s", status, e, body)
        raise


__all__ = ["parse_http_response"]
