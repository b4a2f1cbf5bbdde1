"""A set of Prometheus metrics in a registry of its own (so several servers can live in one process).

The trajectory API and the inference engine each subclass ``MetricSet`` and declare their metrics
with ``counter`` / ``gauge`` / ``histogram``; ``render`` is what ``GET /metrics`` answers.
"""

from __future__ import annotations

from collections.abc import Sequence

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest


class MetricSet:
    """A ``CollectorRegistry`` and shorthands that declare metrics in it."""

    def __init__(self, auto_describe: bool = False) -> None:
        self.registry = CollectorRegistry(auto_describe=auto_describe)

    def counter(self, name: str, doc: str, labels: Sequence[str] = ()) -> Counter:
        return Counter(name, doc, labels, registry=self.registry)

    def gauge(self, name: str, doc: str) -> Gauge:
        return Gauge(name, doc, registry=self.registry)

    def histogram(self, name: str, doc: str, buckets: Sequence[float]) -> Histogram:
        return Histogram(name, doc, buckets=buckets, registry=self.registry)

    def sample_totals(self) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
        """Every sample's current value, keyed by ``(sample name, sorted labels)`` (counters'
        samples are named ``<name>_total``)."""
        return {
            (s.name, tuple(sorted(s.labels.items()))): s.value
            for metric in self.registry.collect()
            for s in metric.samples
        }

    def render(self) -> bytes:
        """The registry in Prometheus's text exposition format."""
        return generate_latest(self.registry)


__all__ = ["MetricSet"]
