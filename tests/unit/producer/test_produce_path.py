"""The producer writes its Produce requests and reads their answers itself
(``kontrakt/protocol/produce.py``), without a request object or the declared codec per
request, over every version class: legacy (v8), flexible (v12), topics by id (v13, which
neither test broker answers); and an answer past the plain shape (record errors, tagged
fields) still reaches its batch through the codec. Against the crafted-response peer
(tests/_crafted_broker.py), which decodes each request with the declared codec and answers
as a test says.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from kontrakt.clients._net import connection
from kontrakt.clients.producer import AsyncProducer
from kontrakt.errors import ProduceError
from kontrakt.protocol import produce
from kontrakt.protocol.messages import ProduceRequest, ProduceResponse
from kontrakt.protocol.records import RecordBatch
from tests._crafted_broker import CraftedBroker

_Topic = ProduceResponse.TopicProduceResponse
_Partition = _Topic.PartitionProduceResponse
_INVALID_RECORD = 87


class _Log:
    """A partition log per (topic, partition) that answers as Kafka does."""

    def __init__(self) -> None:
        self.records: list[tuple[Any, int, bytes | None]] = []  # (topic, partition, value)
        self.refuse: tuple[int, str, list[Any]] | None = None

    def produce(self, version: int, req: Any) -> Any:
        topics = []
        for t in req.topic_data:
            parts = []
            for p in t.partition_data:
                batch = RecordBatch(bytes(p.records))
                if self.refuse is not None:
                    code, message, errors = self.refuse
                    parts.append(_Partition(index=p.index, error_code=code, base_offset=-1,
                                            error_message=message, record_errors=errors))
                    continue
                base = len(self.records)
                for r in batch:
                    self.records.append((t.name or t.topic_id, p.index, r.value))
                parts.append(_Partition(index=p.index, error_code=0, base_offset=base))
            topics.append(_Topic(name=t.name, topic_id=t.topic_id, partition_responses=parts))
        return ProduceResponse(responses=topics)


def _no_codec_for_produce(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make the declared codec refuse Produce on the connection's path."""
    encode, decode = connection.encode_request, connection.decode_response

    def encode_request(msg: Any, *args: Any, **kwargs: Any) -> bytes:
        assert type(msg) is not ProduceRequest, "a Produce request went through the codec"
        return encode(msg, *args, **kwargs)

    def decode_response(cls: Any, *args: Any, **kwargs: Any) -> Any:
        assert cls is not ProduceResponse, "a Produce response went through the codec"
        return decode(cls, *args, **kwargs)

    monkeypatch.setattr(connection, "encode_request", encode_request)
    monkeypatch.setattr(connection, "decode_response", decode_response)
    monkeypatch.setattr(produce, "decode_response", decode_response)


@pytest.mark.parametrize("version", [8, 12, 13])
def test_requests_and_answers_skip_the_declared_codec(
        version: int, monkeypatch: pytest.MonkeyPatch) -> None:
    _no_codec_for_produce(monkeypatch)
    log = _Log()

    async def main() -> None:
        broker = CraftedBroker({0: log.produce}, topics={"orders": 3, "payments": 2},
                               max_versions={0: version})
        async with broker:
            p = AsyncProducer(bootstrap_servers=broker.bootstrap, enable_idempotence=False,
                              linger_ms=50)
            await p.start()
            try:
                first = await asyncio.wait_for(
                    p.send_and_wait("orders", b"one", partition=2), 10)
                assert (first.partition, first.offset) == (2, 0)
                # One request of two topics and three partitions.
                futs = [await p.send("orders", b"two", partition=0),
                        await p.send("payments", b"three", partition=1),
                        await p.send("orders", b"four", partition=1)]
                await p.flush(10)
                offsets = [f.result().offset for f in futs]
            finally:
                await p.close(1)
        assert [v for k, v, _m in broker.seen if k == 0] == [version, version]
        by_id = {i: n for n, i in broker.topic_ids.items()}
        written = [(by_id.get(t, t), part, v) for t, part, v in log.records]
        assert written[0] == ("orders", 2, b"one")
        # Each record's offset is where the broker wrote it.
        assert [written[o] for o in offsets] == [
            ("orders", 0, b"two"), ("payments", 1, b"three"), ("orders", 1, b"four")]

    asyncio.run(main())


@pytest.mark.parametrize("version", [8, 12])
def test_an_answer_past_the_plain_shape_still_fails_its_batch_with_the_brokers_words(
        version: int) -> None:
    log = _Log()
    log.refuse = (_INVALID_RECORD, "record 0 has no key",
                  [_Partition.BatchIndexAndErrorMessage(batch_index=0,
                                                        batch_index_error_message="no key")])

    async def main() -> None:
        broker = CraftedBroker({0: log.produce}, topics={"orders": 1},
                               max_versions={0: version})
        async with broker, AsyncProducer(bootstrap_servers=broker.bootstrap,
                                         enable_idempotence=False, retries=0) as p:
            with pytest.raises(ProduceError, match="record 0 has no key"):
                await p.send_and_wait("orders", b"v")

    asyncio.run(main())


def test_a_bug_while_a_request_waits_for_its_connection_fails_its_records_not_the_close(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The first request to a broker is written by a task that connects first; an
    unexpected error there (not a Kafka one) used to vanish with the task, its batch neither
    queued nor in flight: the send never resolved and close() waited forever."""
    from kontrakt.clients.producer import _requests

    real_wire = _requests.ProduceRequests._wire
    calls = 0

    def broken_once(self: Any, conn: Any, node: int) -> Any:
        nonlocal calls
        calls += 1
        if calls == 1:
            raise RuntimeError("boom")
        return real_wire(self, conn, node)

    monkeypatch.setattr(_requests.ProduceRequests, "_wire", broken_once)
    log = _Log()

    async def main() -> None:
        broker = CraftedBroker({0: log.produce}, topics={"orders": 1})
        async with broker:
            p = AsyncProducer(bootstrap_servers=broker.bootstrap, enable_idempotence=False)
            await p.start()
            try:
                with pytest.raises(ProduceError, match="boom"):
                    await asyncio.wait_for(p.send_and_wait("orders", b"lost?"), 10)
                # The producer goes on: the next record is written.
                meta = await asyncio.wait_for(p.send_and_wait("orders", b"next"), 10)
                assert meta.offset == 0
            finally:
                await asyncio.wait_for(p.close(5), 10)
        assert [v for _t, _p, v in log.records] == [b"next"]

    asyncio.run(main())
