"""Producer metrics: counters updated per batch and request on the event loop."""

from __future__ import annotations

import time

__all__ = ["ProducerMetrics"]


class ProducerMetrics:
    """Counts and rates of records, batches, bytes, retries, errors and request latency.

    Updated only on the producer's event loop, per batch or request (never per record).
    """

    __slots__ = (
        "batches_failed", "batches_sent", "bytes_sent", "epoch_bumps", "errors",
        "latency_max", "latency_sum", "records_failed", "records_sent", "requests",
        "responses", "retries", "started",
    )

    def __init__(self) -> None:
        self.started = time.monotonic()
        self.records_sent = 0
        self.records_failed = 0
        self.batches_sent = 0
        self.batches_failed = 0
        self.bytes_sent = 0
        self.requests = 0
        self.responses = 0
        self.retries = 0
        self.errors = 0
        self.epoch_bumps = 0
        self.latency_sum = 0.0
        self.latency_max = 0.0

    def request_done(self, latency: float) -> None:
        self.responses += 1
        self.latency_sum += latency
        if latency > self.latency_max:
            self.latency_max = latency

    def snapshot(self, buffered_bytes: int, queued_batches: int) -> dict[str, float]:
        """Every metric by name (rates are per second since the producer started)."""
        elapsed = max(time.monotonic() - self.started, 1e-9)
        avg = self.latency_sum / self.responses if self.responses else 0.0
        return {
            "record-send-total": self.records_sent,
            "record-send-rate": self.records_sent / elapsed,
            "record-error-total": self.records_failed,
            "record-error-rate": self.records_failed / elapsed,
            "batch-send-total": self.batches_sent,
            "batch-error-total": self.batches_failed,
            "byte-total": self.bytes_sent,
            "byte-rate": self.bytes_sent / elapsed,
            "request-total": self.requests,
            "request-rate": self.requests / elapsed,
            "response-total": self.responses,
            "retry-total": self.retries,
            "retry-rate": self.retries / elapsed,
            "error-total": self.errors,
            "epoch-bump-total": self.epoch_bumps,
            "request-latency-avg-ms": avg * 1000,
            "request-latency-max-ms": self.latency_max * 1000,
            "records-per-batch-avg": (self.records_sent / self.batches_sent
                                      if self.batches_sent else 0.0),
            "buffer-used-bytes": buffered_bytes,
            "queued-batches": queued_batches,
        }
