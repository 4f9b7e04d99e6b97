"""A sync Producer's caller blocked for buffer memory, without a broker."""

from __future__ import annotations

import time

import pytest

from kontrakt.clients.producer import RecordFuture
from kontrakt.errors import KafkaTimeoutError
from tests.unit.producer.offline import offline_producer
from tests.unit.producer.test_round_trip_paths import _sender


def test_a_caller_refused_memory_that_is_all_freed_before_it_waits_does_not_wait() -> None:
    # The caller's append finds the buffer full; before it waits on memory_freed, the I/O
    # thread completes every batch (its release notifies nobody: no one waits yet). Nothing
    # is buffered any more, so no release will come: the caller must not wait for one
    # (it used to, until max.block.ms, then raised KafkaTimeoutError with an empty buffer).
    core = offline_producer(1, _threaded=True, batch_size=1024, buffer_memory=4096,
                            linger_ms=60_000)
    callers = core.callers
    assert callers is not None
    acc = core._acc
    for _ in range(100):
        res = callers.append("t", b"x" * 900, None, 0, None, None, None)
        if res is None:  # the buffer is full
            break
        assert type(res) is RecordFuture
    else:
        pytest.fail("the buffer never filled")
    s = _sender(acc)
    while acc.incomplete:
        by_node, _wake_at, _missing, _more = s._drain(0.0)
        s._in_flight.clear()
        for b in by_node.get(1, []):
            b.complete(0)
    assert acc.used == 0
    started = time.monotonic()
    try:
        callers.wait_memory(started + 1.5)
    except KafkaTimeoutError:
        pytest.fail(f"waited {time.monotonic() - started:.1f} s for memory already free")
    assert time.monotonic() - started < 0.5
    assert type(callers.append("t", b"y", None, 0, None, None, None)) is RecordFuture
