"""Share consumer metrics: counted on the event loop (once per response, per poll, per
acknowledged partition; never per record), read by :meth:`AsyncShareConsumer.metrics`.

Names follow the Java share consumer's where it has the metric
(``share-fetch-manager-metrics``: ``records-per-request-*``, ``acknowledgements-send-*``,
``acknowledgements-error-*``, ``fetch-*``; ``consumer-share-coordinator-metrics``:
``heartbeat-*``, ``rebalance-total``; ``consumer-share-metrics``: ``time-between-poll-*``,
``last-poll-seconds-ago``); latencies are in milliseconds, as there.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from kontrakt.clients._rates import RateWindow

__all__ = ["ShareConsumerMetrics"]

# The rated counters, in the order the window stores them.
_RATED = ("records", "bytes", "fetches", "acks", "ack_errors", "heartbeats")


class ShareConsumerMetrics:
    """Counters of a share consumer; updated and read on its event loop only."""

    __slots__ = (
        "ack_errors", "acks_sent", "acquired", "bytes", "clock", "fetch_latency_max",
        "fetch_latency_sum", "fetch_size_max", "fetches", "heartbeat_latency_max",
        "heartbeats", "last_heartbeat", "last_poll", "poll_gap_max", "poll_gap_sum", "polls",
        "rebalances", "records", "records_per_request_max", "throttle_max", "throttle_sum",
        "window",
    )

    def __init__(self, clock: Callable[[], float] | None = None) -> None:
        """``clock``: monotonic seconds (default :func:`time.monotonic`)."""
        self.clock = clock or time.monotonic
        self.window = RateWindow(len(_RATED), self.clock)
        self.records = 0          # records handed to the application
        self.bytes = 0            # record bytes of the ShareFetch responses
        self.fetches = 0
        self.fetch_latency_sum = 0.0
        self.fetch_latency_max = 0.0
        self.fetch_size_max = 0
        self.records_per_request_max = 0
        self.acquired = 0         # records the fetches acquired for this member
        self.throttle_sum = 0
        self.throttle_max = 0
        self.acks_sent = 0        # record acknowledgements sent (gaps included)
        self.ack_errors = 0       # of those, answered with an error
        self.heartbeats = 0
        self.heartbeat_latency_max = 0.0
        self.last_heartbeat: float | None = None
        self.rebalances = 0
        self.polls = 0
        self.poll_gap_sum = 0.0
        self.poll_gap_max = 0.0
        self.last_poll: float | None = None

    def _counters(self) -> tuple[int, ...]:
        return (self.records, self.bytes, self.fetches, self.acks_sent, self.ack_errors,
                self.heartbeats)

    def _sample(self) -> None:
        now = self.window.now()
        if self.window.due(now):
            self.window.sample(now, self._counters())

    def fetch_done(self, latency: float, size: int, acquired: int, throttle_ms: int) -> None:
        """A ShareFetch answered after ``latency`` seconds with ``size`` record bytes, of
        which ``acquired`` records were acquired for this member."""
        self.fetches += 1
        self.bytes += size
        self.fetch_size_max = max(self.fetch_size_max, size)
        self.fetch_latency_sum += latency
        self.fetch_latency_max = max(self.fetch_latency_max, latency)
        self.records_per_request_max = max(self.records_per_request_max, acquired)
        self.acquired += acquired
        self.throttle_sum += throttle_ms
        self.throttle_max = max(self.throttle_max, throttle_ms)
        self._sample()

    def acknowledgements_sent(self, count: int) -> None:
        self.acks_sent += count

    def acknowledgements_failed(self, count: int) -> None:
        self.ack_errors += count

    def heartbeat_done(self, latency: float) -> None:
        self.heartbeats += 1
        self.heartbeat_latency_max = max(self.heartbeat_latency_max, latency)
        self.last_heartbeat = self.clock()

    def rebalanced(self) -> None:
        self.rebalances += 1

    def polled(self) -> None:
        """poll() was called."""
        now = self.clock()
        if self.last_poll is not None:
            gap = now - self.last_poll
            self.polls += 1
            self.poll_gap_sum += gap
            self.poll_gap_max = max(self.poll_gap_max, gap)
        self.last_poll = now

    def handed_out(self, count: int) -> None:
        self.records += count

    def snapshot(self, assigned: int) -> dict[str, Any]:
        """What :meth:`AsyncShareConsumer.metrics` returns."""
        now = self.clock()
        r_records, r_bytes, r_fetches, r_acks, r_errors, r_heartbeats = self.window.rates(
            self._counters())
        fetches = self.fetches
        return {
            "records-consumed-total": self.records,
            "records-consumed-rate": r_records,
            "bytes-consumed-total": self.bytes,
            "bytes-consumed-rate": r_bytes,
            "records-per-request-avg": self.acquired / fetches if fetches else 0.0,
            "records-per-request-max": self.records_per_request_max,
            "fetch-total": fetches,
            "fetch-rate": r_fetches,
            "fetch-latency-avg": self.fetch_latency_sum / fetches * 1000 if fetches else 0.0,
            "fetch-latency-max": self.fetch_latency_max * 1000,
            "fetch-size-avg": self.bytes / fetches if fetches else 0.0,
            "fetch-size-max": self.fetch_size_max,
            "fetch-throttle-time-avg": self.throttle_sum / fetches if fetches else 0.0,
            "fetch-throttle-time-max": self.throttle_max,
            "acknowledgements-send-total": self.acks_sent,
            "acknowledgements-send-rate": r_acks,
            "acknowledgements-error-total": self.ack_errors,
            "acknowledgements-error-rate": r_errors,
            "heartbeat-total": self.heartbeats,
            "heartbeat-rate": r_heartbeats,
            "heartbeat-response-time-max": self.heartbeat_latency_max * 1000,
            "last-heartbeat-seconds-ago": (None if self.last_heartbeat is None
                                           else now - self.last_heartbeat),
            "rebalance-total": self.rebalances,
            "assigned-partitions": assigned,
            "time-between-poll-avg": (self.poll_gap_sum / self.polls * 1000 if self.polls
                                      else 0.0),
            "time-between-poll-max": self.poll_gap_max * 1000,
            "last-poll-seconds-ago": None if self.last_poll is None else now - self.last_poll,
        }
