"""Producer metrics: totals since start, rates over a sliding window (a fake clock)."""

from __future__ import annotations

import pytest

from kontrakt.clients.producer._metrics import RATE_WINDOW, ProducerMetrics


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_rates_cover_the_recent_window_not_the_whole_life() -> None:
    clock = Clock()
    m = ProducerMetrics(clock)
    # A burst: 6,000 records in the first minute, one request a second.
    for _ in range(60):
        clock.now += 1
        m.records_sent += 100
        m.bytes_sent += 10_000
        m.requests += 1
        m.request_done(0.002)
    snap = m.snapshot(0, 0)
    assert snap["record-send-rate"] == pytest.approx(100.0)
    assert snap["request-rate"] == pytest.approx(1.0)
    # Then silence for ten windows: the rate falls to 0, the totals stay.
    for _ in range(10 * int(RATE_WINDOW)):
        clock.now += 1
        m.snapshot(0, 0)
    snap = m.snapshot(0, 0)
    assert snap["record-send-rate"] == 0.0
    assert snap["byte-rate"] == 0.0
    assert snap["record-send-total"] == 6000
    assert snap["request-latency-avg-ms"] == pytest.approx(2.0)
    # The history stays bounded however long the producer lives.
    assert len(m._samples) <= RATE_WINDOW + 1


def test_rate_after_a_pause_counts_only_the_new_traffic() -> None:
    clock = Clock()
    m = ProducerMetrics(clock)
    m.records_sent = 1_000_000
    m.request_done(0.001)
    clock.now += 5 * RATE_WINDOW
    m.snapshot(0, 0)
    for _ in range(30):
        clock.now += 1
        m.records_sent += 10
        m.request_done(0.001)
    rate = m.snapshot(0, 0)["record-send-rate"]
    # 300 records in the last 30 s; the million from before the pause does not count.
    assert rate == pytest.approx(300 / 30)


def test_young_producer_rate_is_since_start() -> None:
    clock = Clock()
    m = ProducerMetrics(clock)
    clock.now += 2
    m.records_sent = 50
    m.retries = 4
    snap = m.snapshot(7, 1)
    assert snap["record-send-rate"] == pytest.approx(25.0)
    assert snap["retry-rate"] == pytest.approx(2.0)
    assert snap["buffer-used-bytes"] == 7 and snap["queued-batches"] == 1
