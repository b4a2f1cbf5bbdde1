"""Saying what a run waits for while an inference server that never answered keeps failing.

A wrong port and a server that is still starting (vLLM takes 30-90 s to load a model) look the same
from the client: connections are refused. Both are waited for, up to the manager's
``unavailable_wait`` (``--env.unreachable_timeout``); what changes is that the user is told at once,
and then as it goes:

* the first failure of a server that has never answered: one WARNING naming the server, why it
  failed (``connection refused``, ``no answer within 60s``, ``answered 503``) and how long the run
  keeps trying;
* then, while no server answers, one line every ``interval`` seconds with the time waited so far;
* when it answers at last, one line saying after how long.

A server that did answer and then fails is another story (an outage, retried without limit): the
manager reports that itself, once per outage.
"""

from __future__ import annotations

import logging
import re
import time
from typing import Optional

import httpx

logger = logging.getLogger("atroposlib.inference_clients.server_manager")


def why_down(exc: BaseException) -> str:
    """A few words on why an attempt failed, from the most telling exception in its chain."""
    chain: list[BaseException] = []
    seen: Optional[BaseException] = exc
    while seen is not None and len(chain) < 20:
        chain.append(seen)
        seen = seen.__cause__ or seen.__context__
    for kind, words in (
        (ConnectionRefusedError, "connection refused"),
        (httpx.ConnectTimeout, "connection timed out"),
    ):
        if any(isinstance(e, kind) for e in chain):
            return words
    for e in chain:
        if isinstance(e, httpx.ConnectError):
            return f"cannot connect ({e})"
    text = str(exc)
    status = re.search(r": (\d{3}) ", text)
    if status:  # ServerDown of an HTTP error: "POST url: 503 body"
        return f"answered {status.group(1)}"
    silence = re.search(
        r"(no answer within \S+(?: \([^)]*\))?|accepted connections but answered nothing)", text
    )
    return silence.group(1) if silence else text[:160]


class UnreachableReport:
    """One report per wait (see the module docstring); ``window`` is how long the run waits."""

    def __init__(self, window: float, interval: float = 15.0) -> None:
        self.window = window
        self.interval = interval
        self.since: Optional[float] = None
        self.last_line = 0.0
        self.reasons: dict[str, str] = {}

    def failed(self, url: str, exc: BaseException) -> None:
        """A server that never answered failed an attempt (after its own retries)."""
        reason = why_down(exc)
        self.reasons[url] = reason
        now = time.monotonic()
        if self.since is None:
            self.since = self.last_line = now
            logger.warning(
                "inference server %s: %s; waiting for it to answer, up to %.0fs "
                "(--env.unreachable_timeout; a server still loading its model is fine)",
                url,
                reason,
                self.window,
            )
            return
        self.tick()

    def tick(self) -> None:
        """While waiting: one progress line every ``interval`` seconds."""
        if self.since is None or self.interval <= 0:
            return
        now = time.monotonic()
        if now - self.last_line < self.interval:
            return
        self.last_line = now
        servers = "; ".join(f"{url}: {why}" for url, why in self.reasons.items())
        logger.warning(
            "still waiting for an inference server (%s): %.0fs of %.0fs",
            servers,
            now - self.since,
            self.window,
        )

    def answered(self, url: str) -> None:
        """A server answered: the wait (if any) is over."""
        if self.since is None:
            return
        logger.info(
            "inference server %s answered after %.0fs; carrying on",
            url,
            time.monotonic() - self.since,
        )
        self.since = None
        self.reasons.clear()


__all__ = ["UnreachableReport", "why_down"]
