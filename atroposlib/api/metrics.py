"""Prometheus metrics of one API instance (its own registry, so several apps can live in one process)."""

from __future__ import annotations

from atroposlib.utils.prometheus import MetricSet

_LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5)


class ApiMetrics(MetricSet):
    """Counters, gauges and histograms exported at ``GET /metrics``."""

    def __init__(self) -> None:
        super().__init__(auto_describe=True)
        c, g = self.counter, self.gauge
        # ingest
        self.groups_in = c("atropos_groups_received", "Groups accepted (committed).", ["env"])
        self.sequences_in = c("atropos_sequences_received", "Sequences accepted.")
        self.bytes_in = c("atropos_ingest_bytes", "Payload bytes accepted (decompressed).")
        self.duplicates = c("atropos_duplicate_groups", "Retried groups ignored by group_id.")
        self.rejected = c(
            "atropos_rejected_requests", "Requests refused, by HTTP status.", ["status"]
        )
        self.backpressure = c("atropos_backpressure_rejections", "Ingests refused with 503.")
        # delivery
        self.groups_out = c("atropos_groups_delivered", "Groups handed out in new batches.")
        self.env_groups_out = c(
            "atropos_env_groups_delivered", "Groups handed out in new batches, by env.", ["env"]
        )
        self.batches_out = c("atropos_batches_formed", "Batches formed (each advances the step).")
        self.redeliveries = c("atropos_batch_redeliveries", "Unacknowledged batches sent again.")
        self.acks = c("atropos_batch_acks", "Batches acknowledged (explicitly or implicitly).")
        self.bytes_out = c("atropos_batch_bytes", "Bytes of /batch payloads sent (before gzip).")
        # groups lost on the way
        self.stale_dropped = c(
            "atropos_stale_dropped_groups",
            "Groups dropped as too stale at batch formation.",
            ["env", "length_bucket"],
        )
        self.corrupt_payloads = c(
            "atropos_corrupt_payloads", "Stored payloads that failed their checksum (dropped)."
        )
        self.quarantined = c(
            "atropos_quarantined_groups",
            "Groups of a redelivered batch whose payload could not be delivered (quarantined).",
        )
        # latency
        self.batch_latency = self.histogram(
            "atropos_batch_latency_seconds",
            "Time to answer GET /batch with a batch.",
            _LATENCY_BUCKETS,
        )
        self.ingest_latency = self.histogram(
            "atropos_ingest_latency_seconds",
            "Time to validate and commit one /scored_data body.",
            _LATENCY_BUCKETS,
        )
        # queue
        self.queue_groups = g("atropos_queue_groups", "Groups queued for batching.")
        self.queue_sequences = g("atropos_queue_sequences", "Sequences queued for batching.")
        self.buffered_sequences = g(
            "atropos_buffered_sequences", "Sequences held in mixed-size buffers."
        )
        self.current_step = g("atropos_current_step", "Trainer step counter.")


__all__ = ["ApiMetrics"]
