"""The record path without a broker: encoding, batching, memory, futures, configuration."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import pytest

from kontrakt.clients.producer import PRODUCER_OPTIONS, AsyncProducer, RecordFuture
from kontrakt.clients.producer._accumulator import RecordAccumulator
from kontrakt.clients.producer._batch import ProducerBatch
from kontrakt.clients.producer._config import parse_producer_config
from kontrakt.clients.producer._producer import NEED_METADATA, _TopicParts
from kontrakt.errors import (
    ConfigError,
    IllegalStateError,
    KafkaTimeoutError,
    ProduceError,
    RecordTooLargeError,
)
from kontrakt.protocol.records import CompressionType, RecordBatch, RecordBatchBuilder

BS = "127.0.0.1:9"


def _producer(**kwargs: Any) -> AsyncProducer:
    p = AsyncProducer(bootstrap_servers=BS, **kwargs)
    p._topics["t"] = _TopicParts.of(p._acc, "t", [0, 1], [0, 1], p._cluster.version)
    p._ok = True  # drive the record path without a broker: batches just accumulate
    return p


def _batches(p: AsyncProducer, partition: int = 0) -> list[ProducerBatch]:
    return list(p._acc.queues[("t", partition)])


RECORDS: list[tuple[int, bytes | None, bytes | None, Any]] = [
    (1_700_000_000_000, b"k1", b"v1", None),
    (1_700_000_000_005, None, b"no key", None),
    (1_699_999_999_000, b"k3", None, None),  # earlier than the first: negative delta
    (1_700_000_000_010, b"", b"", [("h1", b"x"), ("h2", None)]),
    (1_700_000_000_011, b"k5", b"v" * 300, {"dict": b"header", "n": None}),
    (1_700_000_000_012, b"k6" * 100, b"z" * 20000, None),
]


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_encoded_batch_decodes_to_what_was_sent(codec: str) -> None:
    p = _producer(compression_type=codec, batch_size=1 << 20)
    futs = [p._append("t", v, k, 0, ts, h, None) for ts, k, v, h in RECORDS]
    [batch] = _batches(p)
    assert [f._index for f in futs] == list(range(len(RECORDS)))
    blob = batch.encode(7, 3, False)
    rb = RecordBatch.from_bytes(blob)
    assert (rb.producer_id, rb.producer_epoch, rb.base_sequence) == (7, 3, -1)
    assert rb.compression == RecordBatchBuilder(compression=codec).compression
    assert rb.max_timestamp == max(r[0] for r in RECORDS)
    got = rb.records()
    assert [(r.timestamp, r.key, r.value) for r in got] == [(ts, k, v) for ts, k, v, _ in RECORDS]
    assert got[3].headers == [("h1", b"x"), ("h2", None)]
    assert got[4].headers == [("dict", b"header"), ("n", None)]
    # Byte-identical to the reference builder for the same records.
    ref = RecordBatchBuilder(compression=codec, max_batch_size=1 << 20)
    for ts, k, v, h in RECORDS:
        ref.append(ts, k, v, list(h.items()) if isinstance(h, dict) else h)
    if codec == "none":
        assert blob == ref.build(producer_id=7, producer_epoch=3)
    assert batch.size_in_bytes == ref.size_in_bytes
    # Once encoded, the batch keeps its records as one joined body, not the callers' objects;
    # a resend (a new epoch and sequence) frames the same records again.
    assert len(batch.parts) == 1
    batch.base_sequence = 40
    again = RecordBatch.from_bytes(batch.encode(7, 4, False))
    assert (again.producer_epoch, again.base_sequence) == (4, 40)
    assert [(r.timestamp, r.key, r.value, r.headers) for r in again.records()] == \
        [(r.timestamp, r.key, r.value, r.headers) for r in got]


def test_batches_split_at_batch_size() -> None:
    p = _producer(batch_size=1000)
    futs = [p._append("t", b"x" * 100, None, 1, 1, None, None) for _ in range(30)]
    batches = _batches(p, 1)
    assert len(batches) == 4
    assert all(b.size_in_bytes <= 1000 for b in batches)
    assert sum(b.record_count for b in batches) == 30
    assert [f._index for f in futs[:9]] == [*range(8), 0]
    # A record bigger than batch.size still goes, alone in its batch.
    p._append("t", b"y" * 5000, None, 1, 1, None, None)
    assert _batches(p, 1)[-1].record_count == 1


def _helped_batches(codec: str) -> tuple[AsyncProducer, list[ProducerBatch]]:
    # A sync producer's accumulator, as far as helping goes: five batches of partition 0,
    # the last still open.
    p = _producer(compression_type=codec, batch_size=2000)
    p._acc.helped = True
    for i in range(5 * 2000 // 120):
        p._append("t", b"v%05d" % i + b"x" * 90, b"k%05d" % i, 0, 1_700_000_000_000 + i, None,
                  None)
    return p, _batches(p)


@pytest.mark.parametrize("codec", ["gzip", "zstd"])
def test_batches_a_helper_compressed_frame_as_the_sender_would(codec: str) -> None:
    # A sync caller handing over compresses the later half of the batches no more records
    # go to (Sender.hand_over); the sender frames them from its work: the same bytes.
    p, batches = _helped_batches(codec)
    _, reference = _helped_batches(codec)
    assert len(batches) == 5
    batches[0].sealed = True  # the sender took it: not the caller's to compress
    claimed = p._acc.claim_closed()
    assert claimed == batches[2:4]  # of 1-3; 4 is open
    assert all(b.helper is not None and b.helper.locked() for b in claimed)
    p._acc.help(claimed)
    assert all(b.helper is not None and not b.helper.locked() for b in claimed)
    for b, ref in zip(batches[2:4], reference[2:4], strict=True):
        assert b.packed is not None
        assert b.encode(7, 3, False) == ref.encode(7, 3, False)
        assert b.helper is None
        # A resend with a new epoch and sequence frames the same compressed records.
        b.base_sequence = ref.base_sequence = 40
        assert b.encode(7, 4, True) == ref.encode(7, 4, True)
    # Left closed and unclaimed: batch 1 (0 is sealed, 2-3 compressed, 4 open).
    assert p._acc.claim_closed() == [batches[1]]


@pytest.mark.parametrize("codec", list(CompressionType))
def test_only_sync_producers_with_gzip_or_zstd_are_helped(codec: CompressionType) -> None:
    # lz4's compressor keeps the GIL (nothing would run beside it), snappy costs a few us.
    for threaded in (False, True):
        acc = RecordAccumulator(batch_size=2000, linger=0.005, buffer_memory=1 << 20,
                                compression=codec, compression_level=None, delivery_timeout=1,
                                threaded=threaded, wakeup=lambda *a, **k: None)
        helped = threaded and codec in (CompressionType.GZIP, CompressionType.ZSTD)
        assert acc.helped is helped
        if not helped:
            assert acc.claim_closed() == []


def test_the_sender_waits_for_a_helper_then_frames_its_work(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from kontrakt.clients.producer import _batch

    monkeypatch.setattr(_batch, "_HELP_WAIT", 30.0)  # however loaded the machine
    p, _ = _helped_batches("zstd")
    _, reference = _helped_batches("zstd")
    claimed = p._acc.claim_closed()

    def helper() -> None:
        time.sleep(0.05)  # the sender gets to the batch first
        p._acc.help(claimed)

    th = threading.Thread(target=helper)
    th.start()
    blob = claimed[0].encode(7, 3, False)
    # It waited for the helper (which sets packed before releasing the batch) instead of
    # compressing the records itself.
    assert claimed[0].packed is not None
    th.join(5)
    assert blob == reference[2].encode(7, 3, False)


def test_a_helper_that_never_finishes_is_waited_for_a_bounded_time(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from kontrakt.clients.producer import _batch

    monkeypatch.setattr(_batch, "_HELP_WAIT", 0.05)
    p, batches = _helped_batches("gzip")
    _, reference = _helped_batches("gzip")
    claimed = p._acc.claim_closed()
    start = time.monotonic()
    blob = claimed[0].encode(7, 3, False)  # no helper comes: compressed here after the wait
    assert 0.04 < time.monotonic() - start < 1.0
    assert blob == reference[batches.index(claimed[0])].encode(7, 3, False)


def test_a_helper_that_fails_leaves_the_batch_to_the_sender(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from kontrakt.clients.producer import _accumulator

    p, batches = _helped_batches("zstd")
    _, reference = _helped_batches("zstd")
    claimed = p._acc.claim_closed()

    def broken(*args: Any, **kwargs: Any) -> bytes:
        raise MemoryError("no room")

    monkeypatch.setattr(_accumulator, "compress", broken)
    p._acc.help(claimed)  # the sending caller does not see the helper's error
    monkeypatch.undo()
    assert all(b.packed is None and not b.helper.locked() for b in claimed if b.helper)
    for b in claimed:
        assert b.encode(7, 3, False) == reference[batches.index(b)].encode(7, 3, False)


def test_type_errors() -> None:
    p = _producer()
    with pytest.raises(TypeError, match="value must be bytes"):
        p._append("t", "text", None, 0, None, None, None)
    with pytest.raises(TypeError, match="key must be bytes"):
        p._append("t", b"v", 12, 0, None, None, None)
    with pytest.raises(TypeError, match="header name"):
        p._append("t", b"v", None, 0, None, [(b"n", b"v")], None)  # type: ignore[list-item]
    with pytest.raises(TypeError, match="header 'n' value"):
        p._append("t", b"v", None, 0, None, [("n", "v")], None)  # type: ignore[list-item]
    assert p._append("t", bytearray(b"v"), memoryview(b"k"), 0, None, None, None)
    assert p._append("other", b"v", None, None, None, None, None) is NEED_METADATA


def test_message_max_bytes_is_checked_before_sending() -> None:
    p = _producer(message_max_bytes=2000)
    limit_value = b"x" * (2000 - 61 - 7 - 3)
    fut = p._append("t", limit_value, None, 1, 0, None, None)
    assert fut._batch.size_in_bytes <= 2000
    with pytest.raises(RecordTooLargeError, match=r"t-1 is 20\d\d bytes.*message.max.bytes"):
        p._append("t", limit_value + b"xxxx", None, 1, 0, None, None)


def test_buffer_memory_refuses_then_frees() -> None:
    p = _producer(buffer_memory=4096, batch_size=1024)
    futs = []
    while True:
        res = p._append("t", b"x" * 200, None, 0, 0, None, None)
        if res is None:
            break
        futs.append(res)
        assert len(futs) < 100
    assert p._acc.used <= 4096
    first = _batches(p)[0]
    first.complete(10)
    assert p._append("t", b"x" * 200, None, 0, 0, None, None) is not None
    assert futs[0].result().offset == 10 and futs[1].result().offset == 11


def test_futures_and_callbacks_resolve_exactly_once() -> None:
    p = _producer()
    fut = p._append("t", b"v", b"k", 0, 123, None, None)
    fut2 = p._append("t", b"v", b"k", 0, 124, None, None)
    calls: list[RecordFuture] = []
    fut.add_done_callback(calls.append)
    assert not fut.done() and not fut.cancelled()
    batch = fut._batch
    assert batch.complete(40, -1) is True
    assert batch.complete(0, -1, ProduceError("late")) is False  # second resolution ignored
    assert calls == [fut]
    fut.add_done_callback(calls.append)  # already done: runs at once
    assert calls == [fut, fut]
    assert fut.result() == fut.metadata()
    md = fut2.result()
    assert (md.topic, md.partition, md.offset, md.timestamp) == ("t", 0, 41, 124)
    assert fut.exception() is None
    assert fut != fut2 and fut == fut and len({fut, fut2}) == 2


def test_failed_future_raises_and_awaits() -> None:
    p = _producer()
    fut = p._append("t", b"v", None, 0, 1, None, None)
    err = ProduceError("boom")

    async def main() -> None:
        waiter = asyncio.ensure_future(_await(fut))
        await asyncio.sleep(0)
        assert fut._batch.urgent  # someone waits: the batch should not linger
        fut._batch.complete(-1, -1, err)
        with pytest.raises(ProduceError, match="boom"):
            await waiter

    asyncio.run(main())
    assert fut.exception() is err
    with pytest.raises(ProduceError):
        fut.result()


async def _await(fut: RecordFuture) -> Any:
    return await fut


def test_result_on_async_loop_refuses_to_block() -> None:
    p = _producer()
    fut = p._append("t", b"v", None, 0, 1, None, None)
    with pytest.raises(IllegalStateError, match="await"):
        fut.result(0.01)


def test_threads_blocked_on_a_batch_all_wake_when_it_completes() -> None:
    # A sync producer's batch keeps a lock per thread blocked on it; every waiter, whether it
    # came before, during or after completion, must return, and one that gave up is
    # forgotten.
    p = AsyncProducer(bootstrap_servers=BS, _threaded=True)
    p._topics["t"] = _TopicParts.of(p._acc, "t", [0], [0], p._cluster.version)
    p._ok = True
    # No sender: the test completes the batch itself.
    p._acc.wakeup = lambda urgent, filled=False: None
    fut = p._append("t", b"v", None, 0, 1, None, None)
    batch = fut._batch
    assert batch.sleepers is None
    results: list[Any] = []
    errors: list[BaseException] = []

    def wait() -> None:
        try:
            results.append(fut.result(5))
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    early = [threading.Thread(target=wait) for _ in range(4)]
    for t in early:
        t.start()
    deadline = time.monotonic() + 5
    while len(batch.sleepers or ()) < 4 and time.monotonic() < deadline:
        time.sleep(0.001)
    assert batch.sleepers is not None and len(batch.sleepers) == 4
    batch.sealed = True  # as the sender does when it takes the batch
    batch.complete(7, -1)
    late = threading.Thread(target=wait)
    late.start()
    for t in [*early, late]:
        t.join(5)
    assert not errors and len(results) == 5
    assert {md.offset for md in results} == {7}
    assert batch.sleepers is None
    other = p._append("t", b"v", None, 0, 1, None, None)
    with pytest.raises(KafkaTimeoutError):
        other.result(0.01)
    with pytest.raises(KafkaTimeoutError):
        other.result(0)
    assert other._batch.sleepers == []
    other._batch.complete(8, -1)
    assert other.result(0).offset == 8


def test_log_append_time_and_acks0_metadata() -> None:
    p = _producer()
    fut = p._append("t", b"v", None, 0, 1, None, None)
    fut._batch.complete(-1, 999)
    md = fut.result()
    assert (md.offset, md.timestamp) == (-1, 999)


# --- configuration --------------------------------------------------------------------------

def test_config_defaults_and_acks() -> None:
    _, s = parse_producer_config({"bootstrap.servers": BS}, {})
    assert (s.acks, s.idempotent, s.batch_size, s.linger, s.max_in_flight) == (-1, True, 131072,
                                                                              0.005, 5)
    for given, acks in (("all", -1), ("-1", -1), (-1, -1), (0, 0), ("1", 1)):
        assert parse_producer_config(None, {"bootstrap_servers": BS, "acks": given})[1].acks \
            == acks
    with pytest.raises(ConfigError, match="acks"):
        parse_producer_config(None, {"bootstrap_servers": BS, "acks": 2})
    with pytest.raises(ConfigError, match="acks"):
        parse_producer_config(None, {"bootstrap_servers": BS, "acks": True})


def test_idempotence_rules_follow_the_java_client() -> None:
    # Not asked for: turned off by a conflicting setting.
    _, s = parse_producer_config(None, {"bootstrap_servers": BS, "acks": 1})
    assert not s.idempotent
    _, s = parse_producer_config(None, {"bootstrap_servers": BS,
                                        "max_in_flight_requests_per_connection": 6})
    assert not s.idempotent
    # Asked for explicitly: a conflict is an error naming it.
    with pytest.raises(ConfigError, match="acks=1"):
        parse_producer_config({"enable.idempotence": True, "acks": "1"},
                              {"bootstrap_servers": BS})
    with pytest.raises(ConfigError, match=r"max\.in\.flight"):
        parse_producer_config({"enable.idempotence": "true",
                               "max.in.flight.requests.per.connection": 10},
                              {"bootstrap_servers": BS})
    _, s = parse_producer_config({"enable.idempotence": False}, {"bootstrap_servers": BS})
    assert not s.idempotent


def test_bad_config() -> None:
    with pytest.raises(ConfigError, match=r"linger\.ms"):
        AsyncProducer(bootstrap_servers=BS, linger_ms=-1)
    with pytest.raises(ConfigError, match="lingr_ms"):
        AsyncProducer(bootstrap_servers=BS, lingr_ms=1)
    with pytest.raises(ConfigError, match=r"compression\.type"):
        AsyncProducer(bootstrap_servers=BS, compression_type="brotli")
    with pytest.raises(ConfigError, match="partitioner"):
        AsyncProducer(bootstrap_servers=BS, partitioner="nope")
    with pytest.raises(ConfigError, match=r"delivery\.timeout\.ms"):
        AsyncProducer(bootstrap_servers=BS, delivery_timeout_ms=1000, request_timeout_ms=5000)
    with pytest.raises(ConfigError, match=r"bootstrap\.servers"):
        AsyncProducer()
    assert {"acks", "linger.ms", "bootstrap.servers", "compression.level"} <= set(
        PRODUCER_OPTIONS)


def test_send_before_start_and_after_close() -> None:
    p = AsyncProducer(bootstrap_servers=BS)

    async def main() -> None:
        with pytest.raises(IllegalStateError, match="not started"):
            await p.send("t", b"v")
        await p.close()
        with pytest.raises(IllegalStateError, match="closed"):
            await p.send("t", b"v")

    asyncio.run(main())


def test_timeout_error_is_a_timeout() -> None:
    assert issubclass(KafkaTimeoutError, TimeoutError)


def test_record_metadata_is_an_immutable_value() -> None:
    import copy
    import pickle

    from kontrakt import RecordMetadata, TopicPartition

    md = RecordMetadata("t", 1, 5, 100)
    assert (md.topic, md.partition, md.offset, md.timestamp, md.serialized_key_size,
            md.serialized_value_size) == ("t", 1, 5, 100, -1, -1)
    assert md.topic_partition == TopicPartition("t", 1)
    assert not hasattr(md, "__dict__")
    with pytest.raises(AttributeError):
        md.offset = 6  # type: ignore[misc]
    assert md == RecordMetadata("t", 1, 5, 100) and hash(md) == hash(RecordMetadata("t", 1, 5, 100))
    assert md != tuple(md) and md.replace(offset=6) == RecordMetadata("t", 1, 6, 100)
    assert pickle.loads(pickle.dumps(md)) == md == copy.deepcopy(md)
    assert repr(md) == ("RecordMetadata(topic='t', partition=1, offset=5, timestamp=100, "
                        "serialized_key_size=-1, serialized_value_size=-1)")
    with pytest.raises(TypeError, match="RecordMetadata has no field 'nope'"):
        md.replace(nope=1)
    match md:
        case RecordMetadata(topic, partition, offset):
            assert (topic, partition, offset) == ("t", 1, 5)
