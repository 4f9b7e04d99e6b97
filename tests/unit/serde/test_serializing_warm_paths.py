"""The serializing clients' warm paths for kontrakt's own serdes (issue 23): a warm Protobuf
record is written and read by the clients with the serde's cached writer / parse and no
``SerializationContext`` (``bare_serializer_core`` / ``bare_deserializer_core`` in
``kontrakt/serde/_shells.py``), and the async clients await nothing for a sync serde.

What the per-record cost is made of is checked by counting the Python frames a record
runs (``sys.setprofile``); what comes out is checked against the serde called directly, and
every case the warm path does not own (errors, headers, rules, a subclass's ``__call__``)
against the serde's own behaviour.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable
from typing import Any

import pytest

from kontrakt._types import ConsumerRecord, TimestampType, TopicPartition
from kontrakt.clients.consumer import AsyncConsumer
from kontrakt.clients.serializing import (
    AsyncDeserializingConsumer,
    AsyncSerializingProducer,
    SerializingProducer,
)
from kontrakt.clients.serializing._consumers import _Decoding
from kontrakt.errors import ValueDeserializationError, ValueSerializationError
from kontrakt.serde import (
    MessageField,
    ProtobufDeserializer,
    ProtobufSerializer,
    SerializationContext,
)
from tests.unit.serde._support import FakeRegistry, proto_modules

pytest.importorskip("grpc_tools")

CTX = SerializationContext("orders", MessageField.VALUE)
NOWHERE = {"bootstrap.servers": "127.0.0.1:9"}


@pytest.fixture(scope="module")
def order_cls() -> Any:
    # The first message of its file: message indexes [0], the framing head the warm paths
    # key (a message at another path takes the deserializer's own path, as before).
    return proto_modules()["order"].Header


def _order(cls: Any, n: int = 1) -> Any:
    return cls(source=f"s-{n}")


def _raw(value: bytes | None, offset: int = 41,
         headers: list[tuple[str, bytes | None]] | None = None) -> ConsumerRecord[Any, Any]:
    return ConsumerRecord("orders", 3, offset, 1_700_000_000_000, TimestampType.CREATE_TIME,
                          b"k", value, [] if headers is None else headers, 7)


def _python_calls(fn: Callable[[], Any]) -> tuple[Any, list[str]]:
    """``fn()``'s result, and the names of the Python frames (functions and coroutines)
    it entered below its own."""
    names: list[str] = []

    def profile(frame: Any, event: str, arg: Any) -> None:
        if event == "call":
            names.append(frame.f_code.co_name)

    sys.setprofile(profile)
    try:
        out = fn()
    finally:
        sys.setprofile(None)
    return out, names[1:]


def _finish(coro: Any) -> Any:
    """Run a coroutine that never suspends to its result, in this frame."""
    try:
        coro.send(None)
    except StopIteration as done:
        return done.value
    raise AssertionError("the coroutine suspended")


def test_a_warm_protobuf_value_is_read_with_no_python_frame_below_decode(
        order_cls: Any) -> None:
    """The consumer parses the payload with upb's FromString itself: no context, no
    deserializer call, no reader closure (before: ``SyncDeserializer.__call__`` and the
    reader, and a context built a record)."""
    data = ProtobufSerializer(order_cls, FakeRegistry())(_order(order_cls), CTX)
    assert data is not None
    de = ProtobufDeserializer(order_cls)
    decoding = _Decoding(None, de)
    first = decoding.decode(_raw(data))  # warms the deserializer's reader
    raw = _raw(data, offset=42)
    out, calls = _python_calls(lambda: decoding.decode(raw))
    assert calls == ["decode"]
    assert out.value == de(data, CTX) == first.value == _order(order_cls)
    assert out == raw.replace(value=out.value)


def test_a_bad_payload_behind_a_warm_head_raises_the_deserializers_error(
        order_cls: Any) -> None:
    data = ProtobufSerializer(order_cls, FakeRegistry())(_order(order_cls), CTX)
    assert data is not None
    decoding = _Decoding(None, ProtobufDeserializer(order_cls))
    decoding.decode(_raw(data))
    bad = _raw(data[:6] + b"\xff\xff\xff", offset=43)
    with pytest.raises(ValueDeserializationError, match="offset 43") as info:
        decoding.decode(bad)
    assert info.value.record is bad
    assert decoding.decode(_raw(data, offset=44)).value == _order(order_cls)


def test_records_with_headers_and_tombstones_keep_the_deserializers_answer(
        order_cls: Any) -> None:
    data = ProtobufSerializer(order_cls, FakeRegistry())(_order(order_cls), CTX)
    assert data is not None
    decoding = _Decoding(None, ProtobufDeserializer(order_cls))
    decoding.decode(_raw(data))
    assert decoding.decode(_raw(data, headers=[("trace", b"1")])).value == _order(order_cls)
    assert decoding.decode(_raw(None)).value is None


def test_a_subclass_with_its_own_call_is_called(order_cls: Any) -> None:
    class Counting(ProtobufDeserializer[Any]):
        def __call__(self, data: bytes | None,
                     ctx: SerializationContext | None = None) -> Any:
            seen.append(ctx)
            return super().__call__(data, ctx)

    seen: list[SerializationContext | None] = []
    data = ProtobufSerializer(order_cls, FakeRegistry())(_order(order_cls), CTX)
    assert data is not None
    decoding = _Decoding(None, Counting(order_cls))
    for offset in (1, 2):
        decoding.decode(_raw(data, offset=offset))
    assert [ctx.offset if ctx else None for ctx in seen] == [1, 2]


def test_read_rules_still_run_on_the_consumer(order_cls: Any) -> None:
    """A writer schema with READ rules has no bare parse: its reader runs with the
    record's context."""
    pytest.importorskip("celpy")
    from kontrakt.registry import MockSchemaRegistryClient
    from kontrakt.registry._models import Metadata
    from kontrakt.serde.rules import RuleRegistry
    from kontrakt.serde.rules.cel import CelFieldExecutor
    from tests.unit.serde.test_protobuf_rules import (
        LATEST,
        TAGGED,
        person,
        person_class,
        register,
    )

    cel = RuleRegistry()
    cel.register_executor(CelFieldExecutor())
    registry = MockSchemaRegistryClient({"url": "mock://warm-paths"})
    cls = person_class(TAGGED)
    mark = {"name": "mark-city", "kind": "TRANSFORM", "mode": "READ", "type": "CEL_FIELD",
            "tags": ["LOCATION"], "expr": "value + '!'"}
    register(registry, mark, metadata=Metadata(tags={"kontrakt.pii.Person.city": ["LOCATION"]}))
    ctx = SerializationContext("people", MessageField.VALUE)
    data = ProtobufSerializer(cls, registry, conf=LATEST, rule_registry=cel)(person(cls), ctx)
    assert data is not None
    de = ProtobufDeserializer(cls, schema_registry_client=registry, rule_registry=cel)
    decoding = _Decoding(None, de)
    for offset in (1, 2):
        raw = _raw(data, offset=offset)
        out = decoding.decode(raw.replace(topic="people"))
        assert out.value.city == "Lyon!"
    assert not de._core.bare


def _capture(p: Any) -> list[tuple[Any, ...]]:
    sent: list[tuple[Any, ...]] = []
    p._producer.produce = p._produce = lambda *args: sent.append(args)
    return sent


def test_a_warm_protobuf_value_is_written_with_the_cached_writer_alone(
        order_cls: Any) -> None:
    """``produce()`` calls the serializer's cached writer with no context (before:
    ``_serialize``, ``new_context`` and ``SyncSerializer.__call__`` a record); the bytes
    are the serializer's."""
    reg = FakeRegistry()
    ser = ProtobufSerializer(order_cls, reg)
    p = SerializingProducer(NOWHERE, value_serializer=ser)
    try:
        sent = _capture(p)
        p.produce("orders", value=_order(order_cls, 1))  # registers, warms the writer
        value = _order(order_cls, 2)
        _, calls = _python_calls(
            lambda: p.produce("orders", value=value, partition=1, timestamp=5))
    finally:
        p.close(0)
    assert calls == ["produce", "write", "<lambda>"]
    assert sent[1] == ("orders", ser(_order(order_cls, 2), CTX), None, 1, None, 5, None)
    assert sent[0][1] == ser(_order(order_cls, 1), CTX)


def test_a_wrong_value_on_the_warm_path_raises_and_queues_nothing(order_cls: Any) -> None:
    p = SerializingProducer(NOWHERE, value_serializer=ProtobufSerializer(order_cls,
                                                                         FakeRegistry()))
    try:
        sent = _capture(p)
        p.produce("orders", value=_order(order_cls))
        with pytest.raises(ValueSerializationError, match="topic 'orders'"):
            p.produce("orders", value="not a message")
    finally:
        p.close(0)
    assert len(sent) == 1


def test_headers_and_key_serializers_take_the_context_path(order_cls: Any) -> None:
    """Headers are copied and a key serializer gets its context (it may append a header);
    the value's bytes are the same."""
    ser = ProtobufSerializer(order_cls, FakeRegistry())
    keys: list[SerializationContext] = []

    def key_ser(obj: Any, ctx: SerializationContext) -> bytes:
        keys.append(ctx)
        return obj.encode()

    p = SerializingProducer(NOWHERE, key_serializer=key_ser, value_serializer=ser)
    try:
        sent = _capture(p)
        mine = [("h", b"1")]
        p.produce("orders", key="a", value=_order(order_cls), headers=mine)
        p.produce("orders", key="b", value=_order(order_cls))
    finally:
        p.close(0)
    value = ser(_order(order_cls), CTX)
    assert sent[0] == ("orders", value, b"a", None, None, None, [("h", b"1")])
    assert sent[0][6] is not mine
    assert sent[1] == ("orders", value, b"b", None, None, None, None)
    assert [ctx.field for ctx in keys] == [MessageField.KEY, MessageField.KEY]


def test_the_async_clients_use_no_coroutine_of_their_own_for_sync_serdes(
        order_cls: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """A sync deserializer's records are decoded by ``decode()`` (before: a
    ``decode_async`` and a ``maybe_await`` coroutine a record), partition by partition;
    a warm value is written with the cached writer, no ``_serialize`` coroutine."""
    ser = ProtobufSerializer(order_cls, FakeRegistry())
    data = ser(_order(order_cls), CTX)
    assert data is not None

    async def main() -> tuple[list[str], list[str], list[Any]]:
        c = AsyncDeserializingConsumer(NOWHERE, value_deserializer=ProtobufDeserializer(
            order_cls))
        raws = [_raw(data, offset=i) for i in range(3)]

        async def fetched(*args: Any, **kwargs: Any) -> Any:
            return {TopicPartition("orders", 3): raws}

        monkeypatch.setattr(AsyncConsumer, "getmany", fetched)
        await c.getmany()
        batches, read_calls = _python_calls(lambda: _finish(c.getmany()))
        out = batches[TopicPartition("orders", 3)]
        await c.close()
        p = AsyncSerializingProducer(NOWHERE, value_serializer=ser)
        sent: list[tuple[Any, ...]] = []

        async def send(*args: Any, **kwargs: Any) -> None:
            sent.append(args)

        p._producer.send = send  # type: ignore[method-assign]
        await p.send("orders", _order(order_cls))
        _, write_calls = _python_calls(lambda: _finish(p.send("orders", _order(order_cls))))
        return read_calls, write_calls, [r.value for r in out] + sent

    read_calls, write_calls, got = asyncio.run(main())
    assert "decode_async" not in read_calls and "maybe_await" not in read_calls
    assert read_calls.count("decode") == 3
    assert "_serialize" not in write_calls and "write" in write_calls
    assert got[:3] == [_order(order_cls)] * 3
    assert got[3:] == [("orders", data, None)] * 2


def test_async_deserializers_are_still_awaited(order_cls: Any) -> None:
    async def de(data: bytes | None, ctx: SerializationContext) -> Any:
        await asyncio.sleep(0)
        return (data, ctx.offset)

    async def main() -> list[Any]:
        c = AsyncDeserializingConsumer(NOWHERE, value_deserializer=de)
        try:
            return [r.value for r in await c._decode_batch([_raw(b"x", offset=9)])]
        finally:
            await c.close()

    assert asyncio.run(main()) == [(b"x", 9)]


def test_contexts_switch_off_the_bare_parses(order_cls: Any) -> None:
    """Once a strategy names a schema context, the framing head no longer names one schema:
    the bare parses go with the warm path's bytes keys."""
    data = ProtobufSerializer(order_cls, FakeRegistry())(_order(order_cls), CTX)
    assert data is not None
    de = ProtobufDeserializer(order_cls)
    de(data, CTX)
    core: Any = de._core
    assert list(core.bare) == [data[:6]]
    core.strategy = _context_strategy
    core.context_subject(CTX)
    assert not core.bare and not core.fast


def _context_strategy(ctx: Any, name: Any) -> str:
    return ":.tenant:orders-value"


class _Seeks:
    def __init__(self) -> None:
        self.seeks: list[tuple[TopicPartition, int]] = []

    def seek(self, tp: TopicPartition, offset: int) -> None:
        self.seeks.append((tp, offset))


def test_a_batch_is_decoded_partition_by_partition_and_rewound_at_a_bad_record() -> None:
    """getmany's decoding keeps the partitions' lists (no flattening and regrouping a
    record); at a bad record, the records before it are returned and every partition is
    rewound to its first record not returned, the bad one first; a bad first record
    raises and is skipped."""
    from kontrakt.clients.serializing._consumers import _decode_batches

    a, b, c = (TopicPartition("orders", p) for p in (0, 1, 2))

    def recs(tp: TopicPartition, *values: bytes) -> list[ConsumerRecord[Any, Any]]:
        return [ConsumerRecord(tp.topic, tp.partition, 10 + i, 0, TimestampType.CREATE_TIME,
                               None, v, [], 1) for i, v in enumerate(values)]

    def decode(raw: ConsumerRecord[Any, Any]) -> ConsumerRecord[Any, Any]:
        if raw.value == b"bad":
            raise ValueDeserializationError("bad", record=raw)
        return raw.replace(value=raw.value.decode())

    batches = {a: recs(a, b"a0"), b: recs(b, b"b0", b"bad", b"b2"), c: recs(c, b"c0")}
    consumer = _Seeks()
    out = _decode_batches(consumer, batches, decode)
    assert {tp: [r.value for r in rs] for tp, rs in out.items()} == {a: ["a0"], b: ["b0"]}
    assert consumer.seeks == [(b, 11), (c, 10)]

    first_bad = {b: recs(b, b"bad", b"b1"), c: recs(c, b"c0")}
    consumer = _Seeks()
    with pytest.raises(ValueDeserializationError):
        _decode_batches(consumer, first_bad, decode)
    assert consumer.seeks == [(b, 11), (c, 10)]
    good = {a: recs(a, b"x", b"y"), c: recs(c, b"z")}
    assert _decode_batches(_Seeks(), good, decode) == {
        tp: [decode(r) for r in rs] for tp, rs in good.items()}


def test_primitive_keys_take_no_context_and_their_errors_name_the_record(
        order_cls: Any) -> None:
    """kontrakt's primitive key serdes read their context only to word an error: the
    clients call them without one (before: a context a record) and, when they raise, again
    with the record's context, whose key error is raised."""
    from kontrakt.errors import KeyDeserializationError, KeySerializationError
    from kontrakt.serde import StringDeserializer, StringSerializer

    ser = ProtobufSerializer(order_cls, FakeRegistry())
    p = SerializingProducer(NOWHERE, key_serializer=StringSerializer(), value_serializer=ser)
    try:
        sent = _capture(p)
        p.produce("orders", key="k0", value=_order(order_cls))
        value = _order(order_cls, 2)
        _, calls = _python_calls(lambda: p.produce("orders", key="k1", value=value))
        with pytest.raises(KeySerializationError, match="topic 'orders'"):
            p.produce("orders", key=7, value=value)
    finally:
        p.close(0)
    assert calls == ["produce", "write", "__call__", "<lambda>"]
    assert sent == [("orders", ser(_order(order_cls), CTX), b"k0", None, None, None, None),
                    ("orders", ser(value, CTX), b"k1", None, None, None, None)]

    data = ser(_order(order_cls), CTX)
    assert data is not None
    decoding = _Decoding(StringDeserializer(), ProtobufDeserializer(order_cls))
    decoding.decode(_raw(data))
    raw = _raw(data, offset=50)
    out, calls = _python_calls(lambda: decoding.decode(raw))
    assert calls == ["decode", "__call__"]
    assert (out.key, out.value) == ("k", _order(order_cls))
    bad = raw.replace(key=b"\xff", offset=51)
    with pytest.raises(KeyDeserializationError, match="offset 51") as info:
        decoding.decode(bad)
    assert info.value.record is bad


def test_only_formats_that_fill_bare_parses_are_looked_up(order_cls: Any) -> None:
    """Avro and JSON Schema readers never have a bare parse: their records go straight to
    the deserializer, with no lookup a record that cannot succeed."""
    from kontrakt.registry import MockSchemaRegistryClient
    from kontrakt.serde import AvroDeserializer, JSONDeserializer

    registry = MockSchemaRegistryClient({"url": "mock://bare"})
    assert _Decoding(None, AvroDeserializer(registry)).value_core is None
    assert _Decoding(None, JSONDeserializer(None, schema_registry_client=registry)
                     ).value_core is None
    assert _Decoding(None, ProtobufDeserializer(order_cls)).value_core is not None
