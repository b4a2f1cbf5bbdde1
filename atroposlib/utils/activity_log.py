"""A server's periodic activity line, the one mechanism the API (``api/activity.py``) and our
inference engine (``inference/activity.py``) share: every ``interval`` seconds, compare the counters
its ``GET /metrics`` exports with the last look and log one line saying what changed (nothing when
nothing did), so the line and the metrics never disagree. Each server words its own line."""

from __future__ import annotations

import asyncio
import logging
from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import Optional

Totals = dict[tuple[str, tuple[tuple[str, str], ...]], float]
"""Every sample's value, keyed by ``(sample name, sorted labels)`` (``MetricSet.sample_totals``)."""


def total(totals: Totals, sample: str) -> float:
    """The sum of ``sample`` over all its label sets."""
    return sum(v for (name, _), v in totals.items() if name == sample)


def increase(before: Totals, now: Totals, sample: str) -> float:
    """How much ``sample`` (summed over its label sets) grew from ``before`` to ``now``."""
    return total(now, sample) - total(before, sample)


class ActivityLine(ABC):
    """Reads ``totals()`` once per ``interval`` and logs ``line()`` to ``logger``."""

    def __init__(
        self, totals: Callable[[], Totals], interval: float, logger: logging.Logger
    ) -> None:
        self._totals = totals
        self.interval = interval
        self.logger = logger
        self.last: Totals = totals()

    def advance(self) -> tuple[Totals, Totals]:
        """(the totals at the last look, the totals now); now becomes the last look."""
        before, self.last = self.last, self._totals()
        return before, self.last

    @abstractmethod
    def line(self) -> Optional[str]:
        """The line for what happened since the last call (``advance()`` once), or None."""

    async def run(self) -> None:
        """Log ``line()`` every ``interval`` seconds until cancelled."""
        while True:
            await asyncio.sleep(self.interval)
            text = self.line()
            if text:
                self.logger.info(text)


__all__ = ["ActivityLine", "Totals", "increase", "total"]
