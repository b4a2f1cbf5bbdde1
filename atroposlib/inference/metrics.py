"""Prometheus metrics of the inference engine (one registry per server, exposed at GET /metrics)."""

from __future__ import annotations

from atroposlib.utils.prometheus import MetricSet


class EngineMetrics(MetricSet):
    """Requests, tokens, tokens/s, batch sizes, queue depth and the loaded weights version."""

    def __init__(self) -> None:
        super().__init__()
        c, g = self.counter, self.gauge
        self.requests = c(
            "atropos_inference_requests",
            "HTTP generation requests by endpoint and status",
            ["endpoint", "status"],
        )
        self.prompt_tokens = c("atropos_inference_prompt_tokens", "Prompt tokens processed")
        self.generated_tokens = c(
            "atropos_inference_generated_tokens", "Completion tokens generated"
        )
        self.tokens_per_second = g(
            "atropos_inference_tokens_per_second", "Generated tokens/s of the most recent batch"
        )
        self.batch_size = self.histogram(
            "atropos_inference_batch_size",
            "Rows per generated batch",
            (1, 2, 4, 8, 16, 32, 64, 128, 256),
        )
        self.batch_seconds = self.histogram(
            "atropos_inference_batch_seconds",
            "Wall time per generated batch",
            (0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60),
        )
        self.queue_depth = g("atropos_inference_queue_depth", "Requests waiting for generation")
        self.rejected = c("atropos_inference_rejected", "Requests refused with 503 (queue full)")
        self.weights_version = g("atropos_inference_weights_version", "Loaded weights version")
        self.aborted = c(
            "atropos_inference_aborted_rows",
            "Rows taken out of generation because their client went away mid-stream",
        )
        self.errors = c("atropos_inference_batch_errors", "Batches that failed with an exception")
        self.refresh_seconds = self.histogram(
            "atropos_inference_refresh_wait_seconds",
            "From a loaded refresh's request to its swap between two decode steps (refresh_mode keep)",
            (0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5),
        )
        self.rows_across_refresh = c(
            "atropos_inference_rows_across_refresh",
            "Rows that went on generating across a weight swap (refresh_mode keep)",
        )


__all__ = ["EngineMetrics"]
