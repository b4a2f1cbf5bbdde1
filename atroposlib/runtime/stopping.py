"""How ``serve``'s loops wait: a sleep that ends as soon as the run is asked to stop.

``serve`` has one ``stop`` event (set by SIGINT/SIGTERM or a fatal failure); the runner and its
collaborators (registration, ``/info``) wait through ``sleep_or_stop`` so a stop is never delayed by
a retry's sleep.
"""

from __future__ import annotations

import asyncio
from typing import Optional


async def sleep_or_stop(
    stop: asyncio.Event, seconds: float, also: Optional[asyncio.Event] = None
) -> None:
    """Sleep ``seconds``, less if ``stop`` (or ``also``) is set meanwhile."""
    waits = [asyncio.ensure_future(stop.wait())]
    if also is not None:
        waits.append(asyncio.ensure_future(also.wait()))
    try:
        await asyncio.wait(waits, timeout=seconds, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for w in waits:
            w.cancel()


__all__ = ["sleep_or_stop"]
