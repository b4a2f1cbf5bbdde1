"""Rollout-failure accounting shared by ``serve`` and ``process``: causes, counts, backoff, fatal errors.

Every item that fails (an env hook raised, the inference server refused or could not be reached)
is counted under a one-line *cause* (``"hook error: ValueError: bad item (my_env.py:42)"``,
``"inference server answered 400"``). The first failure of each cause is logged once (hook errors
with their traceback, so the bug can be found); later ones are only counted, and a summary line
(causes with counts) is logged at most every ``summary_every`` seconds and at the end.

Consecutive failures back off exponentially (``delay()``): a run whose every rollout fails waits
longer and longer between attempts instead of hot-looping. A success resets the backoff.

Some failures end the run at once (``Verdict.fatal``): a 401/403/404 from an inference server
(a wrong key or a model name the server does not have; every request would get the same answer)
and an inference server that never answered a single request within ``--env.unreachable_timeout``.
"""

from __future__ import annotations

import logging
import time
import traceback
from collections import Counter
from dataclasses import dataclass
from typing import Optional

from atroposlib.errors import (
    InferenceError,
    InferenceRejected,
    InferenceUnavailable,
    TokenDrift,
    WorkerTimeout,
)

logger = logging.getLogger(__name__)

CAUSE_UNREACHABLE = "inference server unreachable"


def one_line(exc: BaseException, limit: int = 160) -> str:
    """``Type: first line of message (file.py:line)`` with the innermost frame of the traceback."""
    msg = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    if len(msg) > limit:
        msg = msg[: limit - 1] + "…"
    where = ""
    frames = traceback.extract_tb(exc.__traceback__) if exc.__traceback__ else []
    if frames:
        last = frames[-1]
        where = f" ({last.filename.rsplit('/', 1)[-1]}:{last.lineno})"
    return f"{type(exc).__name__}: {msg}{where}" if msg else f"{type(exc).__name__}{where}"


def cause_of(exc: BaseException) -> str:
    """The summary key of a failure (same key for the same kind of failure)."""
    if isinstance(exc, InferenceRejected):
        return f"inference server answered {exc.status_code}"
    if isinstance(exc, InferenceUnavailable):
        return CAUSE_UNREACHABLE
    if isinstance(exc, InferenceError):
        return f"inference error: {one_line(exc, 80)}"
    if isinstance(exc, TokenDrift):
        return "episode dropped: token drift (on_token_drift=drop)"
    if isinstance(exc, WorkerTimeout):
        return f"worker timeout: {exc}"
    return f"hook error: {one_line(exc)}"


@dataclass
class Verdict:
    cause: str
    fatal: Optional[str] = None  # the one line that ends the run, when the failure is permanent


class FailureTracker:
    """Counts failures by cause, logs each cause once, backs off, says when to stop."""

    def __init__(
        self,
        what: str = "rollout",
        *,
        base_delay: float = 0.5,
        max_delay: float = 30.0,
        summary_every: float = 30.0,
        unreachable_hint: str = "",
    ) -> None:
        self.what = what
        self.base_delay = base_delay
        self.max_delay = max_delay
        self.summary_every = summary_every
        self.unreachable_hint = unreachable_hint
        self.counts: Counter = Counter()
        self.successes = 0
        self.consecutive = 0
        self._last_failure = 0.0
        self._last_summary = time.monotonic()
        self._summarised_total = 0

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    def success(self) -> None:
        self.successes += 1
        self.consecutive = 0

    def failure(self, exc: BaseException, ever_answered: bool = True) -> Verdict:
        """Count one failure; log it if its cause is new; say whether the run must end."""
        cause = cause_of(exc)
        first = cause not in self.counts
        self.counts[cause] += 1
        self.consecutive += 1
        self._last_failure = time.monotonic()
        fatal = None
        if isinstance(exc, InferenceRejected) and exc.permanent:
            fatal = str(exc)
        elif isinstance(exc, InferenceUnavailable) and not ever_answered:
            if exc.slow:  # alive, too slow for the request limit
                fatal = f"{exc}; no request was answered in time"
            else:
                fatal = f"{exc}; the server never answered{self.unreachable_hint}"
        if first and fatal is None:
            hook = cause.startswith("hook error")
            logger.warning(
                "%s failed: %s (further failures of this kind are counted, not logged)",
                self.what,
                one_line(exc) if not hook else cause[len("hook error: ") :],
                exc_info=exc if hook else None,
            )
        self.maybe_summarise()
        return Verdict(cause, fatal)

    def delay(self) -> float:
        """Seconds to wait before the next attempt (0 after a success)."""
        if self.consecutive == 0:
            return 0.0
        return min(self.max_delay, self.base_delay * 2 ** (self.consecutive - 1))

    def ready(self) -> bool:
        """Whether the backoff after the last failure has passed."""
        return time.monotonic() - self._last_failure >= self.delay()

    def summary(self) -> str:
        """``"12 failed (hook error: ...: 10, inference server answered 400: 2)"`` or ``""``."""
        if not self.counts:
            return ""
        parts = ", ".join(f"{c}: {n}" for c, n in self.counts.most_common())
        return f"{self.total} failed ({parts})"

    def maybe_summarise(self, force: bool = False) -> None:
        """Log the summary if failures happened since the last one and it is time (or ``force``)."""
        now = time.monotonic()
        if self.total == self._summarised_total:
            return
        if force or now - self._last_summary >= self.summary_every:
            self._last_summary = now
            self._summarised_total = self.total
            backoff = f"; next attempt in {self.delay():.0f}s" if self.consecutive > 1 else ""
            logger.warning(
                "%ss so far: %d ok, %s%s", self.what, self.successes, self.summary(), backoff
            )


__all__ = ["CAUSE_UNREACHABLE", "FailureTracker", "Verdict", "cause_of", "one_line"]
