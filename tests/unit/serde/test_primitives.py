from __future__ import annotations

import math
import struct
import uuid

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kontrakt.errors import (
    KeyDeserializationError,
    KeySerializationError,
    ValueDeserializationError,
    ValueSerializationError,
)
from kontrakt.serde import (
    BytesDeserializer,
    BytesSerializer,
    DoubleDeserializer,
    DoubleSerializer,
    FloatDeserializer,
    FloatSerializer,
    IntegerDeserializer,
    IntegerSerializer,
    LongDeserializer,
    LongSerializer,
    MessageField,
    SerializationContext,
    ShortDeserializer,
    ShortSerializer,
    StringDeserializer,
    StringSerializer,
    UUIDDeserializer,
    UUIDSerializer,
)

KEY = SerializationContext("orders", MessageField.KEY)
VALUE = SerializationContext("orders", MessageField.VALUE, partition=3, offset=42)


def test_known_encodings() -> None:
    assert IntegerSerializer()(-2, KEY) == b"\xff\xff\xff\xfe"
    assert LongSerializer()(1, KEY) == b"\x00" * 7 + b"\x01"
    assert ShortSerializer()(258, KEY) == b"\x01\x02"
    assert DoubleSerializer()(1.5, KEY) == b"\x3f\xf8" + b"\x00" * 6
    assert FloatSerializer()(1.5, KEY) == b"\x3f\xc0\x00\x00"
    assert StringSerializer()("é", KEY) == b"\xc3\xa9"
    assert StringSerializer("latin-1")("é", KEY) == b"\xe9"
    u = uuid.UUID("12345678-1234-5678-1234-567812345678")
    assert UUIDSerializer()(u, KEY) == b"12345678-1234-5678-1234-567812345678"
    assert BytesSerializer()(bytearray(b"ab"), KEY) == b"ab"


@given(st.integers(min_value=-(2**31), max_value=2**31 - 1),
       st.integers(min_value=-(2**63), max_value=2**63 - 1),
       st.floats(allow_nan=False), st.text(), st.binary(), st.uuids())
def test_round_trips(i: int, q: int, d: float, s: str, b: bytes, u: uuid.UUID) -> None:
    assert IntegerDeserializer()(IntegerSerializer()(i)) == i
    assert LongDeserializer()(LongSerializer()(q)) == q
    assert ShortDeserializer()(ShortSerializer()(i & 0x7FFF)) == i & 0x7FFF
    assert DoubleDeserializer()(DoubleSerializer()(d)) == d
    f = FloatDeserializer()(FloatSerializer()(d)) if abs(d) < 3e38 else None
    if f is not None:
        assert f == struct.unpack(">f", struct.pack(">f", d))[0]
    assert StringDeserializer()(StringSerializer()(s)) == s
    assert BytesDeserializer()(BytesSerializer()(b)) == b
    assert UUIDDeserializer()(UUIDSerializer()(u)) == u


def test_nan_and_none() -> None:
    assert math.isnan(DoubleDeserializer()(DoubleSerializer()(math.nan)))
    for ser in (IntegerSerializer(), LongSerializer(), StringSerializer(), UUIDSerializer(),
                BytesSerializer(), DoubleSerializer(), FloatSerializer(), ShortSerializer()):
        assert ser(None, KEY) is None
    for de in (IntegerDeserializer(), StringDeserializer(), UUIDDeserializer(),
               BytesDeserializer(), DoubleDeserializer()):
        assert de(None, VALUE) is None


def test_serialize_errors_are_typed() -> None:
    with pytest.raises(KeySerializationError, match="orders"):
        IntegerSerializer()(2**31, KEY)
    with pytest.raises(ValueSerializationError):
        IntegerSerializer()("1", SerializationContext("t"))
    with pytest.raises(KeySerializationError):
        IntegerSerializer()(True, KEY)
    with pytest.raises(KeySerializationError):
        StringSerializer("ascii")("é", KEY)
    with pytest.raises(KeySerializationError):
        UUIDSerializer()("not-a-uuid", KEY)


def test_deserialize_errors_name_position() -> None:
    with pytest.raises(ValueDeserializationError, match="partition 3, offset 42") as info:
        IntegerDeserializer()(b"\x00\x01", VALUE)
    assert info.value.record == b"\x00\x01"
    with pytest.raises(KeyDeserializationError):
        LongDeserializer()(b"\x00" * 9, KEY)
    with pytest.raises(ValueDeserializationError):
        StringDeserializer()(b"\xff", VALUE)
    with pytest.raises(ValueDeserializationError):
        UUIDDeserializer()(b"nope", VALUE)
