from __future__ import annotations

import uuid

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kontrakt.errors import SerializationError
from kontrakt.serde import (
    KEY_SCHEMA_ID_HEADER,
    VALUE_SCHEMA_ID_HEADER,
    MessageField,
    SchemaId,
    SerializationContext,
    decode_message_indexes,
    dual_schema_id_deserializer,
    encode_message_indexes,
    header_schema_id_serializer,
    prefix_schema_id_deserializer,
    prefix_schema_id_serializer,
)


def test_index_vectors() -> None:
    # [0] is the one-byte shortcut; otherwise zig-zag count then zig-zag indexes.
    assert encode_message_indexes([0]) == b"\x00"
    assert encode_message_indexes([1]) == b"\x02\x02"
    assert encode_message_indexes([1, 0]) == b"\x04\x02\x00"
    assert encode_message_indexes([0, 64]) == b"\x04\x00\x80\x01"
    # deprecated format: unsigned varints
    assert encode_message_indexes([1], zigzag=False) == b"\x01\x01"
    assert encode_message_indexes([1, 0], zigzag=False) == b"\x02\x01\x00"
    assert decode_message_indexes(b"\x00", 0) == ([0], 1)
    assert decode_message_indexes(b"xx\x04\x02\x00yy", 2) == ([1, 0], 5)


@given(st.lists(st.integers(min_value=-(2**40), max_value=2**40), min_size=1, max_size=20),
       st.booleans())
def test_index_round_trip(indexes: list[int], zigzag: bool) -> None:
    if not zigzag:
        indexes = [abs(i) for i in indexes]
    data = encode_message_indexes(indexes, zigzag)
    got, end = decode_message_indexes(data + b"rest", 0, zigzag)
    assert got == indexes and end == len(data)


def test_index_errors() -> None:
    with pytest.raises(SerializationError):
        encode_message_indexes([])
    with pytest.raises(SerializationError, match="truncated"):
        decode_message_indexes(b"\x04\x02", 0)
    with pytest.raises(SerializationError, match="truncated"):
        decode_message_indexes(b"\x80", 0)
    with pytest.raises(SerializationError, match="count"):
        decode_message_indexes(b"\x01", 0)  # zig-zag -1


def test_prefix_round_trip() -> None:
    sid = SchemaId(258, None, (1, 0))
    data = prefix_schema_id_serializer(b"payload", None, sid)
    assert data == b"\x00\x00\x00\x01\x02" + b"\x04\x02\x00" + b"payload"
    got, offset = prefix_schema_id_deserializer(data, None, True)
    assert got == sid and data[offset:] == b"payload"
    got, offset = prefix_schema_id_deserializer(b"\x00\x00\x00\x00\x07xyz", None)
    assert got.id == 7 and offset == 5


def test_header_and_dual() -> None:
    guid = uuid.uuid4()
    headers: list[tuple[str, bytes | None]] = []
    ctx = SerializationContext("t", MessageField.KEY, headers)
    out = header_schema_id_serializer(b"body", ctx, SchemaId(5, guid, (0,)))
    assert out == b"body"
    assert headers == [(KEY_SCHEMA_ID_HEADER, b"\x01" + guid.bytes + b"\x00")]
    sid, offset = dual_schema_id_deserializer(out, ctx, True)
    assert sid.guid == guid and sid.id is None and offset == 0 and sid.message_indexes == (0,)
    # value side reads the value header only, and falls back to the prefix without one
    vctx = SerializationContext("t", MessageField.VALUE, headers)
    sid, offset = dual_schema_id_deserializer(b"\x00\x00\x00\x00\x09zz", vctx)
    assert sid.id == 9 and offset == 5
    dctx = SerializationContext("t", MessageField.VALUE, {VALUE_SCHEMA_ID_HEADER: b"\x01" +
                                                          guid.bytes})
    sid, _ = dual_schema_id_deserializer(b"raw", dctx)
    assert sid.guid == guid


def test_header_serializer_needs_headers() -> None:
    with pytest.raises(SerializationError):
        header_schema_id_serializer(b"", SerializationContext("t"), SchemaId(1, uuid.uuid4()))
    with pytest.raises(SerializationError, match="GUID"):
        header_schema_id_serializer(b"", SerializationContext("t", headers=[]), SchemaId(1))


@pytest.mark.parametrize("data,match", [
    (b"", "empty"), (b"\x05\x00\x00\x00\x01", "magic byte 5"), (b"\x00\x00\x01", "too short"),
    (b"\x01" + b"\x00" * 10, "too short"),
])
def test_bad_prefix(data: bytes, match: str) -> None:
    with pytest.raises(SerializationError, match=match):
        prefix_schema_id_deserializer(data, None)


def test_schema_id_range() -> None:
    with pytest.raises(SerializationError):
        SchemaId(2**32).id_to_bytes()
    with pytest.raises(SerializationError):
        SchemaId(None).id_to_bytes()
