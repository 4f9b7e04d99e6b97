"""Arrow columns written as Confluent-framed Protobuf, column by column.

For a proto3 message descriptor and the Spark type a read maps it to
(:mod:`kontrakt.spark._proto_types`), an encoder is compiled once that writes the wire
format of each row straight from the Arrow column: per field, one comprehension over the
column's Python values makes each row's tag and payload (``b""`` where the field is left
out), fields in field-number order as ``SerializeToString`` writes them, a nested
message's rows joined and length-prefixed. No message object is built. The bytes are
those of the sink's row path (``proto_writer`` then ``ProtobufSerializer``): implicit
presence leaves out nulls and defaults (a float or double only when it is +0.0), explicit
presence (``optional``, ``oneof`` members, messages) writes what is set, repeated numbers
are packed unless ``[packed = false]``, ``Timestamp`` and ``Duration`` are split as the row
path splits them.

Maps (whose entry order the runtime chooses), proto2 and editions files, and groups have no
column plan (:class:`NoColumnarPlan`): those keep the row path, as does any batch the column
path refuses (a bad enum name, a null array element, two members of a oneof, a time out of
range), whose error the row path then names by row.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from itertools import pairwise
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from kontrakt.errors import SerializationError
from kontrakt.spark._avro_encode import _VAR, Part, _join, _wide
from kontrakt.spark._avro_tree import NoColumnarPlan

if TYPE_CHECKING:
    from kontrakt.registry import SchemaRegistryClient
    from kontrakt.spark._fieldplan import FieldPlan

__all__ = ["ProtoColumnEncoder", "proto_column_encoder"]

Enc = Callable[[pa.Array], list[Part]]
_TABLE = 1 << 14
_MASK64 = (1 << 64) - 1
_MESSAGE, _GROUP, _ENUM = 11, 10, 14
_TIMESTAMP_SECONDS = range(-62_135_596_800, 253_402_300_800)
_DURATION_SECONDS = range(-315_576_000_000, 315_576_000_001)


def _uvarint(z: int) -> bytes:
    return _VAR[z] if z < _TABLE else _wide(z)


def _lengths(values: list[bytes]) -> list[bytes]:
    """Length prefixes (plain varints: Avro's are zig-zag)."""
    u = _uvarint
    return [u(len(v)) for v in values]


def _tag(number: int, wire: int) -> bytes:
    return _uvarint((number << 3) | wire)


# -- scalar payloads (a list of values without None -> the payload bytes of each) ----------
def _varints(values: list[int]) -> list[bytes]:
    u, m = _uvarint, _MASK64
    return [u(v & m) for v in values]  # negative int32/int64/enum: ten bytes


def _zigzags(values: list[int]) -> list[bytes]:
    u = _uvarint
    return [u((v << 1) ^ (v >> 63)) for v in values]


def _packer(fmt: str) -> Callable[[list[Any]], list[bytes]]:
    pack = struct.Struct(fmt).pack
    return lambda values: [pack(v) for v in values]


#: field type -> (wire type, payloads of the values, whether a value is the default)
_SCALARS: dict[int, tuple[int, Callable[[list[Any]], list[bytes]]]] = {
    1: (1, _packer("<d")), 2: (5, _packer("<f")), 3: (0, _varints), 4: (0, _varints),
    5: (0, _varints), 6: (1, _packer("<Q")), 7: (5, _packer("<I")), 8: (0, _varints),
    13: (0, _varints), 15: (5, _packer("<i")), 16: (1, _packer("<q")), 17: (0, _zigzags),
    18: (0, _zigzags),
}


def _is_default(v: Any) -> bool:
    # +0.0 only: -0.0 has a bit set, and the runtime compares bits
    return not v and (type(v) is not float or struct.pack("<d", v) == b"\0" * 8)


def _values(field: Any, arr: pa.Array, path: str) -> list[Any]:
    """The column's values as the field's Python values (None for null)."""
    kind = field.type
    if kind in (4, 6):  # uint64 / fixed64 as Decimal(20, 0)
        return [None if v is None else int(v) for v in arr.to_pylist()]
    if kind == _ENUM:
        numbers = {v.name: v.number for v in field.enum_type.values}
        out: list[int | None] = []
        for name in arr.to_pylist():
            if name is None:
                out.append(None)
                continue
            number = numbers.get(name)
            if number is None:
                try:
                    number = int(name)  # a number a read could not name
                except ValueError:
                    raise SerializationError(f"{path}: {name!r} is not a value of enum "
                                             f"{field.enum_type.full_name}") from None
            out.append(number)
        return out
    if kind == 9:
        arr = arr.cast(pa.binary())
    values: list[Any] = arr.to_pylist()
    return values


def _payloads(field: Any, values: list[Any]) -> tuple[int, list[bytes]]:
    """(wire type, each value's payload) for a non-message field's values (no None)."""
    kind = field.type
    if kind in (9, 12):
        return 2, [n + v for n, v in zip(_lengths(values), values, strict=True)]
    if kind == _ENUM:
        return 0, _varints(values)
    wire, encode = _SCALARS[kind]
    return wire, encode(values)


# -- fields ----------------------------------------------------------------------------------
def _single(field: Any, path: str) -> Enc:
    """A non-repeated scalar field: tag and payload, or nothing. Varints, zig-zags,
    strings and bytes in one comprehension each (no call a row); the fixed-width types
    through their packer."""
    presence = bool(field.has_presence)
    number = field.number
    kind = field.type
    # Varints below _TABLE from the table, inline (no call a row).
    u, m, V, T = _uvarint, _MASK64, _VAR, _TABLE
    if kind in (9, 12):
        tag = _tag(number, 2)

        def text(arr: pa.Array) -> list[Part]:
            values = _values(field, arr, path)
            if presence:
                return [[b"" if v is None else
                         tag + (V[n] if (n := len(v)) < T else u(n)) + v for v in values]]
            return [[tag + (V[n] if (n := len(v)) < T else u(n)) + v if v else b""
                     for v in values]]
        return text
    if kind == _ENUM or _SCALARS[kind][1] is _varints:
        tag = _tag(number, 0)

        def varint(arr: pa.Array) -> list[Part]:
            values = _values(field, arr, path)
            if presence:
                return [[b"" if v is None else tag + (V[z] if (z := v & m) < T else u(z))
                         for v in values]]
            return [[tag + (V[z] if (z := v & m) < T else u(z)) if v else b""
                     for v in values]]
        return varint
    if _SCALARS[kind][1] is _zigzags:
        tag = _tag(number, 0)

        def zigzag(arr: pa.Array) -> list[Part]:
            values = _values(field, arr, path)
            if presence:
                return [[b"" if v is None else
                         tag + (V[z] if (z := (v << 1) ^ (v >> 63)) < T else u(z))
                         for v in values]]
            return [[tag + (V[z] if (z := (v << 1) ^ (v >> 63)) < T else u(z)) if v else b""
                     for v in values]]
        return zigzag

    def scalar(arr: pa.Array) -> list[Part]:
        values = _values(field, arr, path)
        keep = [v is not None and (presence or not _is_default(v)) for v in values]
        present = [v for v, k in zip(values, keep, strict=True) if k]
        if not present:
            return [[b""] * len(values)]
        wire, payloads = _payloads(field, present)
        tag = _tag(number, wire)
        it = iter(payloads)
        return [[tag + next(it) if k else b"" for k in keep]]
    return scalar


def _message_field(field: Any, body: Enc, path: str) -> Enc:
    """A message field: set where the struct is not null (an empty one included)."""
    tag = _tag(field.number, 2)

    def message(arr: pa.Array) -> list[Part]:
        n = len(arr)
        valid = arr.is_valid() if arr.null_count else None
        rows = arr.filter(valid) if valid is not None else arr
        bodies = _join(body(rows)) if len(rows) else []
        framed = [tag + b + v for b, v in zip(_lengths(bodies), bodies, strict=True)]
        if valid is None:
            return [framed]
        it = iter(framed)
        return [[next(it) if ok else b"" for ok in valid.to_pylist()][:n]]
    return message


def _repeated(field: Any, item: Enc | None, path: str) -> Enc:
    """A repeated field: packed numbers in one length-delimited run, else a tag an item."""
    number = field.number
    packed = item is None and field.type not in (9, 12) and bool(field.is_packed)

    def repeated(arr: pa.Array) -> list[Part]:
        offsets = arr.offsets.to_pylist()
        start, end = offsets[0], offsets[-1]
        items = arr.values.slice(start, end - start)
        if items.null_count:
            raise SerializationError(f"{path}: an array element is null, which protobuf "
                                     f"cannot hold")
        if item is not None:
            tag = _tag(number, 2)
            bodies = _join(item(items)) if len(items) else []
            encoded = [tag + b + v for b, v in zip(_lengths(bodies), bodies, strict=True)]
        else:
            wire, payloads = _payloads(field, _values(field, items, path))
            if packed:
                encoded = payloads
            else:
                tag = _tag(number, wire)
                encoded = [tag + p for p in payloads]
        join = b"".join
        if packed:
            tag = _tag(number, 2)
            runs = [join(encoded[a - start:b - start]) if b > a else b""
                    for a, b in pairwise(offsets)]
            return [[tag + _uvarint(len(r)) + r if r else b"" for r in runs]]
        return [[join(encoded[a - start:b - start]) if b > a else b""
                 for a, b in pairwise(offsets)]]
    return repeated


def _well_known(desc: Any, path: str) -> Enc | None:
    """Timestamp and Duration bodies from microseconds, split as the row path splits them."""
    name = desc.full_name
    if name not in ("google.protobuf.Timestamp", "google.protobuf.Duration"):
        return None
    stamp = name.endswith("Timestamp")
    allowed = _TIMESTAMP_SECONDS if stamp else _DURATION_SECONDS
    seconds_tag, nanos_tag = _tag(1, 0), _tag(2, 0)

    def body(arr: pa.Array) -> list[Part]:
        if stamp and arr.type.unit != "us":
            arr = arr.cast(pa.timestamp("us", arr.type.tz))
        micros = arr.cast(pa.int64()).to_pylist()
        seconds_out, nanos_out = [], []
        for us in micros:
            if stamp:
                s, rest = divmod(us, 1_000_000)
            else:
                s, rest = divmod(abs(us), 1_000_000)
                if us < 0:
                    s, rest = -s, -rest
            if s not in allowed:
                raise SerializationError(f"{path}: {s} seconds is outside the range of "
                                         f"{name}")
            seconds_out.append(seconds_tag + _uvarint(s & _MASK64) if s else b"")
            nanos_out.append(nanos_tag + _uvarint((rest * 1000) & _MASK64) if rest else b"")
        return [seconds_out, nanos_out]
    return body


def _syntax(file: Any) -> str:
    """A file's syntax (``FileDescriptor.syntax`` is gone from recent runtimes)."""
    from google.protobuf import descriptor_pb2

    proto = descriptor_pb2.FileDescriptorProto()
    file.CopyToProto(proto)
    return str(proto.syntax) if not proto.edition else "editions"


def _message_body(desc: Any, path: str) -> Enc:
    known = _well_known(desc, path)
    if known is not None:
        return known
    if _syntax(desc.file) != "proto3":
        raise NoColumnarPlan(f"{desc.full_name} is not proto3")
    encs: list[tuple[int, int, Enc]] = []  # number, index in the struct, encoder
    oneofs: dict[str, list[int]] = {}
    for index, f in enumerate(desc.fields):
        where = f"{path}.{f.name}"
        if f.type == _GROUP:
            raise NoColumnarPlan(f"a group at {where}")
        message = f.message_type if f.type == _MESSAGE else None
        if f.is_repeated:
            if message is not None and message.GetOptions().map_entry:
                raise NoColumnarPlan(f"a map at {where}")
            item = None if message is None else _message_body(message, where + "[]")
            enc = _repeated(f, item, where)
        elif message is not None:
            enc = _message_field(f, _message_body(message, where), where)
        else:
            enc = _single(f, where)
        if f.containing_oneof is not None and not f.containing_oneof.name.startswith("_"):
            oneofs.setdefault(f.containing_oneof.name, []).append(index)
        encs.append((f.number, index, enc))
    encs.sort()  # the wire order is the field numbers'

    def body(arr: pa.Array) -> list[Part]:
        for name, members in oneofs.items():
            if len(members) > 1:
                counts = [0] * len(arr)
                for m in members:
                    for i, ok in enumerate(arr.field(m).is_valid().to_pylist()):
                        counts[i] += ok
                if max(counts, default=0) > 1:
                    raise SerializationError(f"{path}: oneof {name!r} has two members set")
        parts: list[Part] = []
        for _, index, enc in encs:
            parts.extend(enc(arr.field(index)))
        if not parts:
            parts.append([b""] * len(arr))
        return parts
    return body


class ProtoColumnEncoder:
    """Encodes an Arrow struct column (the Spark type of a proto3 message) as
    Confluent-framed Protobuf payloads, one a row.

    Args:
        descriptor: the message's descriptor.
        prefix: the framing: magic byte, 4-byte schema id and message indexes.
        path: the column, for messages.

    Raises:
        NoColumnarPlan: a map, a group, or a file that is not proto3 (see the module).
    """

    def __init__(self, descriptor: Any, prefix: bytes, path: str = "value") -> None:
        self.prefix = prefix
        self._body = _message_body(descriptor, path)

    def encode(self, column: pa.Array) -> list[bytes | None]:
        """The framed payload of each row; None for a null row (a tombstone).

        Raises:
            SerializationError: a value the message cannot hold (see the module).
        """
        if isinstance(column, pa.ChunkedArray):
            column = column.combine_chunks()
        valid = column.is_valid() if column.null_count else None
        rows = column.filter(valid) if valid is not None else column
        prefix = self.prefix
        body = [prefix + b for b in _join(self._body(rows))] if len(rows) else []
        if valid is None:
            return body  # type: ignore[return-value]  # list is invariant
        it = iter(body)
        return [next(it) if ok else None for ok in valid.to_pylist()]


def proto_column_encoder(plan: FieldPlan, client: SchemaRegistryClient, subject: str,
                         path: str) -> ProtoColumnEncoder | None:
    """The column encoder the sink uses for ``subject``, or None where the row path must
    write: the subject's latest schema must still be the planned one, without WRITE rules,
    and have a column plan.

    Raises:
        SchemaRegistryError: the registry failed (the row path would fail the same way).
    """
    import logging

    from kontrakt.serde._framing import SchemaId
    from kontrakt.spark._fieldplan import column_path_schema

    latest = column_path_schema(plan, client, subject, path)
    if latest is None:
        return None
    descriptor = plan.message_descriptor()
    prefix = SchemaId(latest.schema_id, None, _indexes(descriptor), True).id_to_bytes()
    try:
        return ProtoColumnEncoder(descriptor, prefix, path)
    except NoColumnarPlan as exc:
        logging.getLogger("kontrakt.spark").info(
            "%s: no column-wise Protobuf encoder (%s); encoding row by row", path, exc)
        return None


def _indexes(descriptor: Any) -> tuple[int, ...]:
    """The message's path in its file (Confluent's message indexes)."""
    out: list[int] = []
    desc = descriptor
    while desc.containing_type is not None:
        parent = desc.containing_type
        out.append(list(parent.nested_types).index(desc))
        desc = parent
    out.append(list(desc.file.message_types_by_name.values()).index(desc))
    return tuple(reversed(out))
