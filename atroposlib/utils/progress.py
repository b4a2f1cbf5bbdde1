"""Progress for people and for log files: a tqdm bar on a terminal, plain lines everywhere else.

A tqdm bar redraws itself with ``\\r``; written to a log file or a pipe, every redraw lands on one
ever-growing line. ``Progress`` draws the bar only when its stream is a terminal and otherwise logs
one line every ``interval`` seconds (and one at the end). ``quiet_library_bars`` turns off the bars
libraries draw on their own (transformers' "Loading weights", the hub's downloads) unless stderr is
a terminal.
"""

from __future__ import annotations

import logging
import os
import sys
import time
from typing import IO, Any, Optional

log = logging.getLogger(__name__)


def is_terminal(stream: Optional[IO[str]] = None) -> bool:
    """Whether ``stream`` (default: stderr) is an interactive terminal."""
    stream = stream if stream is not None else sys.stderr
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False


def quiet_library_bars() -> None:
    """Unless stderr is a terminal: no progress bars from transformers and the hub client."""
    if is_terminal():
        return
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")  # read when they are imported
    if "transformers" in sys.modules:  # already imported: tell it directly
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()


class Progress:
    """``done`` out of ``total`` ``unit``s: a tqdm bar on a terminal, else a log line every
    ``interval`` seconds (``0``: only at the end) through ``logger``."""

    def __init__(
        self,
        total: Optional[int],
        desc: str,
        unit: str,
        *,
        enabled: bool = True,
        interval: float = 15.0,
        logger: Optional[logging.Logger] = None,
        stream: Optional[IO[str]] = None,
    ) -> None:
        self.total, self.desc, self.unit = total, desc, unit
        self.enabled = enabled
        self.interval = interval
        self.logger = logger or log
        self.done = 0
        self.extra: dict[str, Any] = {}
        self.bar: Any = None
        self._last = time.monotonic()
        self._logged_done = -1
        if enabled and is_terminal(stream):
            from tqdm import tqdm

            self.bar = tqdm(total=total, desc=desc, unit=unit, file=stream)

    def set(self, done: int, **extra: Any) -> None:
        """Progress is now ``done``; ``extra`` (e.g. ``mean_score="0.25"``) is shown with it."""
        self.done, self.extra = done, extra
        if self.bar is not None:
            self.bar.n = done
            self.bar.set_postfix(**extra, refresh=False)
            self.bar.refresh()
            return
        now = time.monotonic()
        if self.enabled and self.interval > 0 and now - self._last >= self.interval:
            self._log()

    def add(self, n: int = 1, **extra: Any) -> None:
        self.set(self.done + n, **(extra or self.extra))

    def text(self) -> str:
        of = f"/{self.total}" if self.total is not None else ""
        extra = "".join(f", {k} {v}" for k, v in self.extra.items())
        return f"{self.desc}: {self.done}{of} {self.unit}{extra}"

    def _log(self) -> None:
        self._last = time.monotonic()
        self._logged_done = self.done
        self.logger.info(self.text())

    def close(self) -> None:
        """Close the bar, or log the last line (unless it was just logged)."""
        if self.bar is not None:
            self.bar.close()
            self.bar = None
        elif self.enabled and self._logged_done != self.done:
            self._log()


__all__ = ["Progress", "is_terminal", "quiet_library_bars"]
