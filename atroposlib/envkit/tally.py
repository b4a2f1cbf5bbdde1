"""Counting what happens in an env by kind: each kind counted, its first occurrence logged once.

The house rule for run-time outcomes (a malformed tool call, a tool that raised, an episode cut at
``max_turns``, a token drift) is "counted where the user looks, logged once per kind". ``Tally`` does
both: ``tally.count("tool error", "ZeroDivisionError", detail)`` adds one to
``<prefix>/tool_error/ZeroDivisionError`` (an env metric, logged with every step's metrics from then
on) and logs the first such event at WARNING with its detail; later ones are only counted.
"""

from __future__ import annotations

import logging
import re
from collections import Counter
from collections.abc import Callable
from typing import Any, Optional

logger = logging.getLogger(__name__)


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "_", text).strip("_").lower() or "other"


class Tally:
    """Per-kind counters reported through ``set_metric(name, value)`` (an env's ``set_metric``)."""

    def __init__(
        self, set_metric: Optional[Callable[[str, Any], None]] = None, prefix: str = "train"
    ) -> None:
        self.counts: Counter[str] = Counter()
        self._set_metric = set_metric
        self._prefix = prefix

    def metric_name(self, event: str, kind: Optional[str] = None) -> str:
        """``<prefix>/<event>`` or ``<prefix>/<event>/<kind>``, lower-case with underscores."""
        name = f"{self._prefix}/{_slug(event)}"
        return name if kind is None else f"{name}/{_slug(kind)}"

    def count(
        self,
        event: str,
        kind: Optional[str] = None,
        detail: str = "",
        n: int = 1,
        quiet: bool = False,
    ) -> None:
        """Count ``n`` events; the first of this (event, kind) is logged at WARNING with ``detail``
        (``quiet``: an expected event, such as a right answer, is only counted)."""
        if n <= 0:
            return
        name = self.metric_name(event, kind)
        if self.counts[name] == 0 and not quiet:
            what = event if kind is None else f"{event} ({kind})"
            logger.warning(
                "%s%s; counted in %s, further ones are not logged",
                what,
                f": {detail}" if detail else "",
                name,
            )
        self.counts[name] += n
        if self._set_metric is not None:
            self._set_metric(name, self.counts[name])

    def total(self, event: str) -> int:
        """All counts of ``event`` over its kinds."""
        name = self.metric_name(event)
        return sum(v for k, v in self.counts.items() if k == name or k.startswith(name + "/"))


__all__ = ["Tally"]
