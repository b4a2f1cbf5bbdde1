"""What the engine says while it serves: one summary line per interval instead of a line per request.

uvicorn's access log (``--access-log``) writes a line for every request, which for an RL run is
hundreds a minute. By default the engine logs instead, every ``--activity-interval`` seconds in which
requests came:

    engine: 96 requests in the last 60s (/v1/completions 200: 94, 400: 2); 6144 tokens generated,
    102.4 tokens/s; queue 0; weights v3

read from the counters ``GET /metrics`` exports.
"""

from __future__ import annotations

import logging
from collections import Counter

from atroposlib.inference.engine import InferenceEngine
from atroposlib.utils.activity_log import ActivityLine, increase

logger = logging.getLogger("atroposlib.inference")


class EngineActivity(ActivityLine):
    """Compares the engine's counters with the last look and logs what changed."""

    def __init__(self, engine: InferenceEngine, interval: float) -> None:
        self.engine = engine
        super().__init__(lambda: engine.metrics.sample_totals(), interval, logger)

    def line(self) -> str | None:
        """The line for the requests since the last call, or None when none came."""
        before, now = self.advance()
        by_route: Counter[tuple[str, str]] = Counter()
        for (name, labels), value in now.items():
            if name == "atropos_inference_requests_total":
                delta = value - before.get((name, labels), 0.0)
                if delta:
                    lab = dict(labels)
                    by_route[(lab.get("endpoint", "?"), lab.get("status", "?"))] += int(delta)
        total = sum(by_route.values())
        if not total:
            return None
        tokens = increase(before, now, "atropos_inference_generated_tokens_total")
        routes: dict[str, list[str]] = {}
        for (endpoint, status), n in sorted(by_route.items()):
            routes.setdefault(endpoint, []).append(f"{status}: {n}")
        detail = ", ".join(f"{e} {' '.join(s)}" for e, s in routes.items())
        return (
            f"engine: {total} requests in the last {self.interval:.0f}s ({detail}); "
            f"{tokens:.0f} tokens generated, {tokens / self.interval:.1f} tokens/s; "
            f"queue {self.engine.queue_depth()}; weights v{self.engine.weights_version}"
        )


__all__ = ["EngineActivity"]
