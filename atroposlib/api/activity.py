"""What ``run-api`` says while it runs: one line per interval when groups arrived or batches left.

The API answers every request without logging it (that would be one line per group); instead,
every ``--progress-interval`` seconds (default 30; 0: never) in which something happened it logs

    run-api: 24 groups (192 sequences) arrived in the last 30s (addition_0: 24); 2 batches handed out;
    queue 12 groups; trainer step 5

read from the same counters ``GET /metrics`` exports, so the line and the metrics never disagree.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from atroposlib.api.metrics import ApiMetrics
from atroposlib.type_definitions import Status
from atroposlib.utils.activity_log import ActivityLine, Totals, increase

logger = logging.getLogger("atroposlib.api")


def _by_env(totals: Totals, sample: str) -> dict[str, float]:
    return {
        dict(labels).get("env", "?"): v for (name, labels), v in totals.items() if name == sample
    }


class ActivityLog(ActivityLine):
    """Compares the API's counters with the last look and logs what changed (see the module)."""

    def __init__(self, metrics: ApiMetrics, status: Callable[[], Status], interval: float) -> None:
        self.metrics = metrics
        self.status = status
        super().__init__(metrics.sample_totals, interval, logger)

    def line(self) -> str | None:
        """The line for what happened since the last call, or None when nothing did."""
        before, now = self.advance()
        groups = increase(before, now, "atropos_groups_received_total")
        seqs = increase(before, now, "atropos_sequences_received_total")
        batches = increase(before, now, "atropos_batches_formed_total")
        refused = increase(before, now, "atropos_backpressure_rejections_total")
        if not (groups or batches or refused):
            return None
        old = _by_env(before, "atropos_groups_received_total")
        envs = {
            env: n - old.get(env, 0.0)
            for env, n in _by_env(now, "atropos_groups_received_total").items()
        }
        per_env = ", ".join(f"{env}: {n:.0f}" for env, n in sorted(envs.items()) if n)
        parts = [
            f"{groups:.0f} groups ({seqs:.0f} sequences) arrived in the last {self.interval:.0f}s"
            + (f" ({per_env})" if per_env else "")
        ]
        if refused:
            parts.append(f"{refused:.0f} refused while the queue was full")
        parts.append(f"{batches:.0f} batches handed out")
        st = self.status()
        parts.append(f"queue {st.queue_size} groups")
        parts.append(
            f"trainer step {st.current_step}"
            if st.started
            else ("no trainer yet" if not st.registered else "trainer registered, no batch asked")
        )
        return "run-api: " + "; ".join(parts)


__all__ = ["ActivityLog"]
