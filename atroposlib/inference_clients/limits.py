"""Request limits of one inference server: a semaphore whose size follows the env's weight."""

from __future__ import annotations

import asyncio
from typing import Any, Optional


class WeightedSemaphore:
    """A concurrency limit whose effective size is ``max_val * weight`` (at least 1)."""

    def __init__(self, max_val: int) -> None:
        self.max_val = max_val
        self.weight = 1.0
        self.in_use = 0
        self._cond: Optional[asyncio.Condition] = None

    def limit(self) -> int:
        w = self.weight if self.weight > 0 else 1.0
        return max(1, int(self.max_val * min(w, 1.0)))

    def available(self) -> int:
        return self.limit() - self.in_use

    def update_weight(self, weight: float) -> None:
        self.weight = weight

    @property
    def _value(self) -> int:  # asyncio.Semaphore's name for the free slots (Atropos code reads it)
        return self.available()

    @_value.setter
    def _value(self, free: int) -> None:
        self.in_use = self.limit() - free

    async def __aenter__(self) -> WeightedSemaphore:
        if self._cond is None:
            self._cond = asyncio.Condition()
        async with self._cond:
            await self._cond.wait_for(lambda: self.in_use < self.limit())
            self.in_use += 1
        return self

    async def __aexit__(self, *exc: Any) -> None:
        assert self._cond is not None
        async with self._cond:
            self.in_use -= 1
            self._cond.notify_all()


AsyncSemWithAdaptiveWeight = WeightedSemaphore  # Atropos's name

__all__ = ["AsyncSemWithAdaptiveWeight", "WeightedSemaphore"]
