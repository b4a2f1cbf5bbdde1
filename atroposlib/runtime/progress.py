"""``serve``'s progress line and the aggregation of per-group drop messages.

``ProgressLine.maybe_log`` writes one line at most every ``--env.progress_interval`` seconds:
groups sent, dropped by reason, failed rollouts by cause, groups noted by kind (sent without
inference logprobs, with an estimated policy version, generated across a weight refresh), items in flight, the spool, the API's queue
and the policy version (trainer step) against ``total_steps``.

``FirstOfEachDrop`` is a logging filter for the module that drops groups (``dropping a group ...``):
the first message of each kind is logged, later ones only counted (they appear in the progress
line and the final summary), so an untrained model whose every group has equal scores does not
write one log line per group. ``serve`` and ``process`` both install it.
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Callable, Mapping
from typing import Optional

logger = logging.getLogger(__name__)
DROP_LOGGER = "atroposlib.runtime.sending"
"""The logger of the module that drops groups (``sending``)."""


class FirstOfEachDrop(logging.Filter):
    """Let through the first ``dropping ...`` record of each message template, then only count."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: set[str] = set()
        self.suppressed = 0

    def filter(self, record: logging.LogRecord) -> bool:
        template = str(record.msg)
        if not template.startswith("dropping"):
            return True
        if template in self.seen:
            self.suppressed += 1
            return False
        self.seen.add(template)
        record.msg = template + "; further drops of this kind are counted, not logged"
        return True

    def install(self) -> FirstOfEachDrop:
        logging.getLogger(DROP_LOGGER).addFilter(self)
        return self

    def remove(self) -> None:
        logging.getLogger(DROP_LOGGER).removeFilter(self)


def format_counts(counts: Mapping[str, int]) -> str:
    return ", ".join(f"{k}: {v}" for k, v in Counter(counts).most_common() if v)


DROP_HINTS = {
    "same_scores": "all scores equal, with --env.ensure_scores_are_not_same",
    "too_long": "a sequence longer than the trainer's max_token_len",
    "wrong_group_size": "not group_size sequences",
}


def explain_drops(counts: Mapping[str, int]) -> str:
    """``same_scores: 30 (all scores equal; ...)``: each drop reason with its count and meaning."""
    parts = []
    for reason, n in Counter(counts).most_common():
        if n:
            hint = DROP_HINTS.get(reason)
            parts.append(f"{reason}: {n}" + (f" ({hint})" if hint else ""))
    return ", ".join(parts)


def progress_text(
    *,
    sent: int,
    all_equal: int = 0,
    drops: Mapping[str, int],
    failures: str,
    in_flight: int,
    spooled: int,
    queue: Optional[int],
    step: int,
    total_steps: int,
    notes: Optional[Mapping[str, int]] = None,
) -> str:
    """``serve: 12 groups sent (5 all-equal), 30 dropped (same_scores: 30), 4 in flight, ...``"""
    dropped = sum(drops.values())
    parts = [f"{sent} groups sent" + (f" ({all_equal} all-equal)" if all_equal else "")]
    parts.append(f"{dropped} dropped ({format_counts(drops)})" if dropped else "0 dropped")
    if failures:
        parts.append(f"rollouts {failures}")
    if notes and any(notes.values()):
        parts.append(f"groups noted ({format_counts(notes)})")
    parts.append(f"{in_flight} in flight")
    parts.append(f"{spooled} spooled")
    if queue is not None:
        parts.append(f"API queue {queue}")
    parts.append(f"policy v{step} (trainer step {step}/{total_steps})")
    return "serve: " + ", ".join(parts)


class ProgressLine:
    """Logs a progress line (``progress_text``) every ``interval`` seconds (0: never)."""

    def __init__(self, interval: float) -> None:
        self.interval = interval
        self._last = time.monotonic()

    def maybe_log(self, make_text: Callable[[], str], force: bool = False) -> Optional[str]:
        """Log ``make_text()`` if the interval has passed (or ``force``); the line, or None."""
        if self.interval <= 0 and not force:
            return None
        now = time.monotonic()
        if not force and now - self._last < self.interval:
            return None
        self._last = now
        text = make_text()
        logger.info(text)
        return text


__all__ = [
    "DROP_LOGGER",
    "DROP_HINTS",
    "FirstOfEachDrop",
    "ProgressLine",
    "explain_drops",
    "format_counts",
    "progress_text",
]
