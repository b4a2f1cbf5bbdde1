"""Prometheus metrics of the inference engine (one registry per server, exposed at GET /metrics)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram


class EngineMetrics:
    """Requests, tokens, tokens/s, batch sizes, queue depth and the loaded weights version."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.requests = Counter(
            "atropos_inference_requests",
            "HTTP generation requests by endpoint and status",
            ["endpoint", "status"],
            registry=r,
        )
        self.prompt_tokens = Counter(
            "atropos_inference_prompt_tokens", "Prompt tokens processed", registry=r
        )
        self.generated_tokens = Counter(
            "atropos_inference_generated_tokens", "Completion tokens generated", registry=r
        )
        self.tokens_per_second = Gauge(
            "atropos_inference_tokens_per_second",
            "Generated tokens/s of the most recent batch",
            registry=r,
        )
        self.batch_size = Histogram(
            "atropos_inference_batch_size",
            "Rows per generated batch",
            buckets=(1, 2, 4, 8, 16, 32, 64, 128, 256),
            registry=r,
        )
        self.batch_seconds = Histogram(
            "atropos_inference_batch_seconds",
            "Wall time per generated batch",
            registry=r,
            buckets=(0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60),
        )
        self.queue_depth = Gauge(
            "atropos_inference_queue_depth", "Requests waiting for generation", registry=r
        )
        self.rejected = Counter(
            "atropos_inference_rejected", "Requests refused with 503 (queue full)", registry=r
        )
        self.weights_version = Gauge(
            "atropos_inference_weights_version", "Loaded weights version", registry=r
        )
        self.errors = Counter(
            "atropos_inference_batch_errors", "Batches that failed with an exception", registry=r
        )


__all__ = ["EngineMetrics"]
