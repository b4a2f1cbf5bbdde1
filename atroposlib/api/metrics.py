"""Prometheus metrics of one API instance (its own registry, so several apps can live in one process)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest


class ApiMetrics:
    """Counters, gauges and histograms exported at ``GET /metrics``."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self.groups_in = Counter(
            "atropos_groups_received", "Groups accepted (committed).", ["env"], registry=r
        )
        self.sequences_in = Counter("atropos_sequences_received", "Sequences accepted.", registry=r)
        self.bytes_in = Counter(
            "atropos_ingest_bytes", "Payload bytes accepted (decompressed).", registry=r
        )
        self.duplicates = Counter(
            "atropos_duplicate_groups", "Retried groups ignored by group_id.", registry=r
        )
        self.rejected = Counter(
            "atropos_rejected_requests", "Requests refused, by HTTP status.", ["status"], registry=r
        )
        self.backpressure = Counter(
            "atropos_backpressure_rejections", "Ingests refused with 503.", registry=r
        )
        self.groups_out = Counter(
            "atropos_groups_delivered", "Groups handed out in new batches.", registry=r
        )
        self.batches_out = Counter(
            "atropos_batches_formed", "Batches formed (each advances the step).", registry=r
        )
        self.redeliveries = Counter(
            "atropos_batch_redeliveries", "Unacknowledged batches sent again.", registry=r
        )
        self.acks = Counter(
            "atropos_batch_acks", "Batches acknowledged (explicitly or implicitly).", registry=r
        )
        self.bytes_out = Counter(
            "atropos_batch_bytes", "Bytes of /batch payloads sent (before gzip).", registry=r
        )
        self.stale_dropped = Counter(
            "atropos_stale_dropped_groups",
            "Groups dropped as too stale at batch formation.",
            ["env", "length_bucket"],
            registry=r,
        )
        self.corrupt_payloads = Counter(
            "atropos_corrupt_payloads",
            "Stored payloads that failed their checksum (dropped).",
            registry=r,
        )
        self.quarantined = Counter(
            "atropos_quarantined_groups",
            "Groups of a redelivered batch whose payload could not be delivered (quarantined).",
            registry=r,
        )
        self.batch_latency = Histogram(
            "atropos_batch_latency_seconds",
            "Time to answer GET /batch with a batch.",
            buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5),
            registry=r,
        )
        self.ingest_latency = Histogram(
            "atropos_ingest_latency_seconds",
            "Time to validate and commit one /scored_data body.",
            buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5),
            registry=r,
        )
        self.queue_groups = Gauge("atropos_queue_groups", "Groups queued for batching.", registry=r)
        self.queue_sequences = Gauge(
            "atropos_queue_sequences", "Sequences queued for batching.", registry=r
        )
        self.buffered_sequences = Gauge(
            "atropos_buffered_sequences", "Sequences held in mixed-size buffers.", registry=r
        )
        self.current_step = Gauge("atropos_current_step", "Trainer step counter.", registry=r)

    def render(self) -> bytes:
        return generate_latest(self.registry)


__all__ = ["ApiMetrics"]
