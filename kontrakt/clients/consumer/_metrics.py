"""Consumer metrics: fetches and commits counted on the event loop, the rest read when asked.

Names follow the Java consumer's (``consumer-fetch-manager-metrics`` and
``consumer-coordinator-metrics``); latencies are in milliseconds, as there.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from kontrakt.clients._rates import RateWindow

if TYPE_CHECKING:
    from kontrakt._types import TopicPartition
    from kontrakt.clients.consumer._consumer import AsyncConsumer

__all__ = ["ConsumerMetrics", "attach", "consumer_metrics"]

# The rated counters, in the order the window stores them.
_RATED = ("records", "bytes", "fetches", "commits")


class ConsumerMetrics:
    """Counters of fetch responses and commits.

    Updated only on the consumer's event loop: once per fetch response (never per record)
    and once per commit. ``consumed`` (set by the consumer) returns the records and bytes
    handed to the application so far; the rates sample it at most once a second.
    """

    __slots__ = (
        "commit_latency_max", "commit_latency_sum", "commits", "consumed", "fetch_bytes",
        "fetch_latency_max", "fetch_latency_sum", "fetch_size_max", "fetches", "received",
        "window",
    )

    def __init__(self, clock: Callable[[], float] | None = None) -> None:
        """``clock``: monotonic seconds (default :func:`time.monotonic`)."""
        self.window = RateWindow(len(_RATED), clock)
        self.consumed: Callable[[], tuple[int, int]] = lambda: (0, 0)
        self.fetches = 0
        self.fetch_bytes = 0
        self.fetch_size_max = 0
        self.fetch_latency_sum = 0.0
        self.fetch_latency_max = 0.0
        self.commits = 0
        self.commit_latency_sum = 0.0
        self.commit_latency_max = 0.0
        #: per partition: [records, fetched bytes] decoded from its fetch responses
        self.received: dict[TopicPartition, list[int]] = {}

    def _counters(self) -> tuple[int, ...]:
        records, size = self.consumed()
        return records, size, self.fetches, self.commits

    def fetch_done(self, latency: float, response: Any) -> None:
        """A fetch response arrived ``latency`` seconds after its request was sent (the
        broker's wait for ``fetch.min.bytes`` included, as in the Java client)."""
        self.fetches += 1
        size = sum(len(p.records) for t in response.responses for p in t.partitions
                   if p.records)
        self.fetch_bytes += size
        self.fetch_size_max = max(self.fetch_size_max, size)
        self.fetch_latency_sum += latency
        self.fetch_latency_max = max(self.fetch_latency_max, latency)
        now = self.window.now()
        if self.window.due(now):
            self.window.sample(now, self._counters())

    def partition_received(self, tp: TopicPartition, records: int, size: int) -> None:
        """A chunk of ``tp``'s fetched records was decoded into the buffer (once per chunk)."""
        counts = self.received.get(tp)
        if counts is None:
            self.received[tp] = [records, size]
        else:
            counts[0] += records
            counts[1] += size

    def commit_done(self, latency: float) -> None:
        """An offset commit succeeded after ``latency`` seconds (retries included)."""
        self.commits += 1
        self.commit_latency_sum += latency
        self.commit_latency_max = max(self.commit_latency_max, latency)


def attach(c: AsyncConsumer[Any, Any]) -> None:
    """Wire a new consumer's metrics: its fetcher's counters learn what was consumed, and
    its group coordinator (if any) reports commits to them."""
    m: ConsumerMetrics = c._fetcher.metrics
    buf = c._buffer

    def consumed() -> tuple[int, int]:
        with buf.lock:
            return buf.consumed_counts()

    m.consumed = consumed
    if c._coordinator is not None:
        c._coordinator.on_commit = m.commit_done


def consumer_metrics(c: AsyncConsumer[Any, Any]) -> dict[str, Any]:
    """What :meth:`AsyncConsumer.metrics` returns (on the consumer's loop thread)."""
    m: ConsumerMetrics = c._fetcher.metrics
    buf = c._buffer
    with buf.lock:
        records, size = buf.consumed_counts()
        states = list(c._subs.assignment.items())
    r_records, r_bytes, r_fetches, r_commits = m.window.rates(
        (records, size, m.fetches, m.commits))
    partitions: dict[str, dict[str, Any]] = {}
    lags: list[int] = []
    for tp, st in states:
        lag = c.lag(tp)
        if lag is not None:
            lags.append(lag)
        partitions[str(tp)] = {
            "records-lag": lag,
            "highwater": st.highwater,
            "position": None if st.position is None else st.position.offset,
        }
    group = c._coordinator
    return {
        "records-consumed-total": records,
        "records-consumed-rate": r_records,
        "bytes-consumed-total": size,
        "bytes-consumed-rate": r_bytes,
        "fetch-total": m.fetches,
        "fetch-rate": r_fetches,
        "fetch-latency-avg": m.fetch_latency_sum / m.fetches * 1000 if m.fetches else 0.0,
        "fetch-latency-max": m.fetch_latency_max * 1000,
        "fetch-size-avg": m.fetch_bytes / m.fetches if m.fetches else 0.0,
        "fetch-size-max": m.fetch_size_max,
        "records-lag-max": max(lags) if lags else None,
        "assigned-partitions": len(states),
        "rebalance-total": group.rebalances if group is not None else 0,
        "commit-total": m.commits,
        "commit-rate": r_commits,
        "commit-latency-avg": m.commit_latency_sum / m.commits * 1000 if m.commits else 0.0,
        "commit-latency-max": m.commit_latency_max * 1000,
        "partitions": partitions,
    }
