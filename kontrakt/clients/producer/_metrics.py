"""Producer metrics: counters updated per batch and request on the event loop."""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable

__all__ = ["RATE_WINDOW", "ProducerMetrics"]

#: Seconds of history behind each ``*-rate`` metric. Like the Java client's sampled rates
#: (two 30 s samples by default), a rate describes the recent past, not the whole life of a
#: long-running producer, whose lifetime average would hide a stall that started an hour in.
RATE_WINDOW = 60.0

# Seconds between two samples: the rate's granularity, and 60 samples at most.
_SAMPLE_EVERY = 1.0

# Counters that have a rate, in the order a sample stores them.
_RATED = ("records_sent", "records_failed", "bytes_sent", "requests", "retries")


class ProducerMetrics:
    """Counts and rates of records, batches, bytes, retries, errors and request latency.

    Updated only on the producer's event loop, per batch or request (never per record).
    Rates are per second over the last :data:`RATE_WINDOW` seconds (or since the producer
    started, if that is more recent).
    """

    __slots__ = (
        "_clock", "_samples", "batches_failed", "batches_sent", "bytes_sent", "epoch_bumps",
        "errors", "latency_max", "latency_sum", "records_failed", "records_sent", "requests",
        "responses", "retries", "started",
    )

    def __init__(self, clock: Callable[[], float] | None = None) -> None:
        """``clock``: seconds, monotonic (default :func:`time.monotonic`; tests pass their own)."""
        self._clock = clock or time.monotonic
        self.started = self._clock()
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
        # (time, rated counters), at most one a second: a rate subtracts the oldest sample
        # inside the window from the current counters. Samples are taken when responses
        # arrive and when metrics are read, so after an idle spell the oldest one left may be
        # younger than the window: the rate then spans less time, never traffic from before.
        self._samples: deque[tuple[float, tuple[int, ...]]] = deque(
            [(self.started, (0,) * len(_RATED))])

    def _counters(self) -> tuple[int, ...]:
        return (self.records_sent, self.records_failed, self.bytes_sent, self.requests,
                self.retries)

    def _sample(self, now: float) -> None:
        samples = self._samples
        if now - samples[-1][0] >= _SAMPLE_EVERY:
            samples.append((now, self._counters()))
        start = now - RATE_WINDOW
        while samples[0][0] < start:
            samples.popleft()
            if not samples:
                samples.append((now, self._counters()))

    def request_done(self, latency: float) -> None:
        self.responses += 1
        self.latency_sum += latency
        if latency > self.latency_max:
            self.latency_max = latency
        now = self._clock()
        if now - self._samples[-1][0] >= _SAMPLE_EVERY:
            # (Only a new sample can let old ones go: the last is inside the window.)
            self._sample(now)

    def snapshot(self, buffered_bytes: int, queued_batches: int) -> dict[str, float]:
        """Every metric by name (rates per second over the last RATE_WINDOW seconds)."""
        now = self._clock()
        self._sample(now)
        since, base = self._samples[0]
        elapsed = max(now - since, 1e-9)
        r_sent, r_failed, r_bytes, r_requests, r_retries = (
            (cur - old) / elapsed for cur, old in zip(self._counters(), base, strict=True))
        avg = self.latency_sum / self.responses if self.responses else 0.0
        return {
            "record-send-total": self.records_sent,
            "record-send-rate": r_sent,
            "record-error-total": self.records_failed,
            "record-error-rate": r_failed,
            "batch-send-total": self.batches_sent,
            "batch-error-total": self.batches_failed,
            "byte-total": self.bytes_sent,
            "byte-rate": r_bytes,
            "request-total": self.requests,
            "request-rate": r_requests,
            "response-total": self.responses,
            "retry-total": self.retries,
            "retry-rate": r_retries,
            "error-total": self.errors,
            "epoch-bump-total": self.epoch_bumps,
            "request-latency-avg-ms": avg * 1000,
            "request-latency-max-ms": self.latency_max * 1000,
            "records-per-batch-avg": (self.records_sent / self.batches_sent
                                      if self.batches_sent else 0.0),
            "buffer-used-bytes": buffered_bytes,
            "queued-batches": queued_batches,
        }
