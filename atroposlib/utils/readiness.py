"""Waiting until HTTP servers answer: the one rule every readiness wait follows (``net.wait_for_http``,
the launcher's wait for each component's ``/health``).

A server answers when a GET of its URL returns any status below 500 within ``PROBE_TIMEOUT_S`` (a 4xx
is a live server refusing the request). Every round probes each server still waited for, in order:
first whether its process is gone (the caller's ``exited``: the error to raise), then the probe, then
its own deadline (``timeouts`` counts from the start of the wait); rounds are ``POLL_S`` apart.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Hashable, Mapping
from typing import Optional, TypeVar

import httpx

PROBE_TIMEOUT_S = 2.0
"""Seconds one probe may take; a slower answer counts as no answer this round."""
POLL_S = 0.1
"""Seconds between two rounds of probes."""

K = TypeVar("K", bound=Hashable)


def answers(client: httpx.Client, url: str) -> tuple[bool, Optional[httpx.TransportError]]:
    """Whether ``url`` answers now (a status below 500), and the transport error when it did not
    connect at all."""
    try:
        return client.get(url).status_code < 500, None
    except httpx.TransportError as e:
        return False, e


def _nothing() -> None:
    return None


def wait_until_answering(
    urls: Mapping[K, str],
    timeouts: Mapping[K, float],
    *,
    exited: Callable[[K], Optional[BaseException]],
    timed_out: Callable[[K, Optional[httpx.TransportError]], BaseException],
    ready: Callable[[K], None] = lambda _key: None,
    before_round: Callable[[], None] = _nothing,
    headers: Optional[dict[str, str]] = None,
) -> None:
    """Probe every ``urls[key]`` until each answers (``ready(key)`` then). Raises ``exited(key)``
    when that is not None (the server's process is gone), ``timed_out(key, last_transport_error)``
    once ``timeouts[key]`` seconds have passed without an answer; ``before_round`` runs before each
    round (a stop check, a state save)."""
    start = time.monotonic()
    deadline = {key: start + timeouts[key] for key in urls}
    last: dict[K, Optional[httpx.TransportError]] = {key: None for key in urls}
    waiting = dict(urls)
    with httpx.Client(timeout=PROBE_TIMEOUT_S, headers=headers) as client:
        while waiting:
            before_round()
            for key, url in list(waiting.items()):
                gone = exited(key)
                if gone is not None:
                    raise gone
                ok, error = answers(client, url)
                if ok:
                    del waiting[key]
                    ready(key)
                    continue
                last[key] = error or last[key]
                if time.monotonic() > deadline[key]:
                    raise timed_out(key, last[key])
            if waiting:
                time.sleep(POLL_S)


__all__ = ["POLL_S", "PROBE_TIMEOUT_S", "answers", "wait_until_answering"]
