"""The per-record pieces of the serializing clients, built for speed: the contexts handed to
serializers and deserializers (``kontrakt/serde/_context.py``'s ContextShell) and the
records rebuilt around what they return (``kontrakt/clients/serializing/_consumers.py``),
and ``SerializationContext``'s own ``__init__``. Each is checked against the slow, obvious
construction it replaces.
"""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any

import pytest

from kontrakt._types import ConsumerRecord, TimestampType
from kontrakt.clients.serializing._consumers import _Decoding
from kontrakt.errors import ValueDeserializationError
from kontrakt.serde import MessageField, SerializationContext

_RAW = ConsumerRecord(topic="orders", partition=3, offset=41, timestamp=1_700_000_000_000,
                      timestamp_type=TimestampType.LOG_APPEND_TIME, key=b"k", value=b"v",
                      headers=[("h", b"1")], leader_epoch=7)


class _Recorder:
    def __init__(self, result: Any) -> None:
        self.result = result
        self.seen: list[tuple[Any, SerializationContext]] = []

    def __call__(self, data: Any, ctx: SerializationContext) -> Any:
        self.seen.append((data, ctx))
        return self.result


def _expected(key: Any, value: Any) -> ConsumerRecord[Any, Any]:
    return ConsumerRecord(topic=_RAW.topic, partition=_RAW.partition, offset=_RAW.offset,
                          timestamp=_RAW.timestamp, timestamp_type=_RAW.timestamp_type,
                          key=key, value=value, headers=_RAW.headers,
                          leader_epoch=_RAW.leader_epoch)


def _decode(decoding: _Decoding, raw: ConsumerRecord[Any, Any],
            sync: bool) -> ConsumerRecord[Any, Any]:
    return decoding.decode(raw) if sync else asyncio.run(decoding.decode_async(raw))


@pytest.mark.parametrize("sync", [True, False], ids=["sync", "async"])
def test_decoded_record_keeps_every_field_and_contexts_name_the_record(sync: bool) -> None:
    key_de, value_de = _Recorder("K"), _Recorder({"v": 1})
    out = _decode(_Decoding(key_de, value_de), _RAW, sync)
    assert type(out) is ConsumerRecord
    assert out == _expected("K", {"v": 1})
    assert out.headers is _RAW.headers
    (kdata, kctx), = key_de.seen
    (vdata, vctx), = value_de.seen
    assert (kdata, vdata) == (b"k", b"v")
    assert kctx == SerializationContext("orders", MessageField.KEY, _RAW.headers, 3, 41)
    assert vctx == SerializationContext("orders", MessageField.VALUE, _RAW.headers, 3, 41)
    assert kctx.headers is _RAW.headers and vctx.headers is _RAW.headers


@pytest.mark.parametrize("sync", [True, False], ids=["sync", "async"])
def test_a_value_only_consumer_passes_the_key_through(sync: bool) -> None:
    value_de = _Recorder("V")
    out = _decode(_Decoding(None, value_de), _RAW, sync)
    assert out == _expected(b"k", "V")
    assert [ctx.field for _, ctx in value_de.seen] == [MessageField.VALUE]
    key_de = _Recorder("K")
    assert _decode(_Decoding(key_de, None), _RAW, sync) == _expected("K", b"v")


def test_without_deserializers_the_record_is_returned_as_is() -> None:
    assert _Decoding(None, None).decode(_RAW) is _RAW


@pytest.mark.parametrize("sync", [True, False], ids=["sync", "async"])
def test_a_failing_value_deserializer_raises_with_the_raw_record(sync: bool) -> None:
    def bad(data: Any, ctx: SerializationContext) -> Any:
        raise ValueError("no")

    with pytest.raises(ValueDeserializationError) as info:
        _decode(_Decoding(None, bad), _RAW, sync)
    assert info.value.record is _RAW
    assert "partition 3 offset 41" in str(info.value)


def test_serialization_context_is_still_a_frozen_dataclass() -> None:
    ctx = SerializationContext("t", MessageField.KEY, [], 1, 2)
    assert (ctx.topic, ctx.field, ctx.headers, ctx.partition, ctx.offset) == (
        "t", MessageField.KEY, [], 1, 2)
    with pytest.raises(dataclasses.FrozenInstanceError):
        ctx.topic = "u"  # type: ignore[misc]
    plain = SerializationContext(topic="t")
    assert (plain.field, plain.headers, plain.partition, plain.offset) == (
        MessageField.VALUE, None, None, None)
    assert dataclasses.replace(ctx, offset=9) == SerializationContext(
        "t", MessageField.KEY, [], 1, 9)
    assert [f.name for f in dataclasses.fields(ctx)] == [
        "topic", "field", "headers", "partition", "offset"]
    assert repr(plain) == ("SerializationContext(topic='t', field=<MessageField.VALUE: "
                           "'value'>, headers=None, partition=None, offset=None)")
    assert hash(plain) == hash(SerializationContext("t"))
    assert not hasattr(ctx, "__dict__")


@pytest.mark.parametrize("sync", [True, False], ids=["sync", "async"])
@pytest.mark.parametrize("shell", [True, False], ids=["shell", "constructor"])
def test_contexts_built_as_shells_are_plain_frozen_contexts(
        sync: bool, shell: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """The consumer builds contexts as slot shells that become ``SerializationContext``
    (``ContextShell``), or through the constructor when the layouts differ; either way a
    deserializer gets an ordinary, frozen, equal context."""
    from kontrakt.serde import _context

    assert _context.shell_fits()  # the fast construction is the one in use
    monkeypatch.setattr(_context, "SHELL_FITS", shell)
    key_de, value_de = _Recorder("K"), _Recorder("V")
    decoding = _Decoding(key_de, value_de)
    assert decoding.slow_contexts is not shell
    assert _decode(decoding, _RAW, sync) == _expected("K", "V")
    (_, kctx), = key_de.seen
    (_, vctx), = value_de.seen
    for ctx, field in ((kctx, MessageField.KEY), (vctx, MessageField.VALUE)):
        assert type(ctx) is SerializationContext
        built = SerializationContext("orders", field, _RAW.headers, 3, 41)
        assert ctx == built and repr(ctx) == repr(built)
        assert dataclasses.replace(ctx, offset=1) == dataclasses.replace(built, offset=1)
        with pytest.raises(dataclasses.FrozenInstanceError):
            ctx.offset = 1  # type: ignore[misc]
        assert not hasattr(ctx, "__dict__")
    plain = SerializationContext("orders", MessageField.VALUE, None, 3, 41)
    assert hash(_context.new_context("orders", MessageField.VALUE, None, 3, 41)) == hash(plain)


def test_a_shell_of_another_layout_is_refused() -> None:
    """A SerializationContext whose slots change (a field added, reordered) makes the
    serializing clients fall back to the constructor rather than build broken contexts."""
    from kontrakt.serde import _context

    class Other:
        __slots__ = ("field", "headers", "offset", "partition", "topic")

    assert not _context.shell_fits(Other)


@pytest.mark.parametrize("shell", [True, False], ids=["shell", "constructor"])
def test_serializing_producers_hand_serializers_plain_frozen_contexts(
        shell: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """The serializing producers build their contexts as the consumers do; a serializer
    gets an ordinary frozen context whose headers list is the one the record is sent
    with (a header-framing serializer appends to it)."""
    from kontrakt.clients.serializing import AsyncSerializingProducer, SerializingProducer
    from kontrakt.serde import _context

    monkeypatch.setattr(_context, "SHELL_FITS", shell)

    def key_ser(obj: Any, ctx: SerializationContext) -> bytes:
        seen.append(ctx)
        return b"k"

    def value_ser(obj: Any, ctx: SerializationContext) -> bytes:
        seen.append(ctx)
        assert ctx.headers is not None and not isinstance(ctx.headers, dict)
        ctx.headers.append(("schema", b"1"))
        return b"v"

    for make in (SerializingProducer, AsyncSerializingProducer):
        seen: list[SerializationContext] = []
        p: Any = make({"bootstrap.servers": "127.0.0.1:9"}, key_serializer=key_ser,
                      value_serializer=value_ser)
        try:
            out = p._serialize("orders", "key", "value", None)
            if make is AsyncSerializingProducer:
                out = asyncio.run(out)
        finally:
            if make is SerializingProducer:
                p.close(0)
        assert out == (b"k", b"v", [("schema", b"1")])
        for ctx, field in zip(seen, (MessageField.KEY, MessageField.VALUE), strict=True):
            assert type(ctx) is SerializationContext
            assert ctx == SerializationContext("orders", field, out[2])
            assert ctx.headers is out[2]
            with pytest.raises(dataclasses.FrozenInstanceError):
                ctx.topic = "other"  # type: ignore[misc]
