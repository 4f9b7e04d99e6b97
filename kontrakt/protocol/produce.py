"""Produce request frames and response answers, written and read directly: the producer's
path, once per request.

The declared codec (``codec.py``) builds a ProduceRequest object, walks its topics and
partitions, and decodes a response into nested objects. For an awaited single send that is
most of the client's own work per round trip (~1,500 bytecodes of ~4,800): the request
object, a version check, a codec lookup and a uvarint call per length on the way out; three
objects, nine uvarint calls and two string slices on the way back. :class:`ProduceWire`
writes the same bytes with what does not change between requests (the header's client id,
the transactional id, acks and timeout, each topic's name) encoded once, and reads a
response's answers as tuples, falling back to the declared codec for anything but the plain
shape (tagged fields, record errors, counts or names past one varint byte, bad bytes). Both
are checked byte for byte, and answer for answer, against the codec over every version.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Sequence
from typing import Any

from kontrakt.errors import UnsupportedVersionError
from kontrakt.protocol import primitives as P
from kontrakt.protocol.headers import decode_response
from kontrakt.protocol.messages import ProduceRequest, ProduceResponse

__all__ = ["Answer", "ProduceTopics", "ProduceWire", "answers_of"]

#: one partition's answer: (topic name, topic id, partition, error code, base offset,
#: log append time, error message). The id is None unless the answer names its topic by a
#: (non-zero) id, as v13 does; the name is then "".
Answer = tuple[str, uuid.UUID | None, int, int, int, int, str | None]
#: a request's topics (names, or ids from v13) and their partitions' record batches
ProduceTopics = Sequence[tuple[str | uuid.UUID, Sequence[tuple[int, bytes]]]]

_HEAD = struct.Struct(">ihhi")  # frame size, api key, api version, correlation id
_ACKS_TIMEOUT = struct.Struct(">hi")
_INT32 = struct.Struct(">i")
_INDEX_SIZE = struct.Struct(">ii")
_INT16 = struct.Struct(">h")
#: index, error code, base offset, log append time (v3-4); and log start offset (v5+)
_PART_V3 = struct.Struct(">ihqq")
_PART_V5 = struct.Struct(">ihqqq")
_ONE_BYTE = [bytes((i,)) for i in range(128)]
_ZERO_ID = bytes(16)
_API_KEY = ProduceRequest.API_KEY


def _uvarint(value: int) -> bytes:
    if value < 0x80:
        return _ONE_BYTE[value]
    if value < 0x4000:
        return bytes(((value & 0x7F) | 0x80, value >> 7))
    buf = bytearray()
    P.write_uvarint(buf, value)
    return bytes(buf)


class ProduceWire:
    """Produce requests of one version, client id, transactional id, acks and timeout.

    Args:
        version: the Produce version (3-13).
        client_id: the request header's client id.
        transactional_id, acks, timeout_ms: the request's fields.

    Raises:
        UnsupportedVersionError: ``version`` is not a Produce version.
    """

    __slots__ = ("_fixed", "_flexible", "_names", "_part", "_v8", "version")

    def __init__(self, version: int, client_id: str | None, transactional_id: str | None,
                 acks: int, timeout_ms: int) -> None:
        if version not in ProduceRequest.VALID_VERSIONS:
            raise UnsupportedVersionError(
                f"ProduceRequest has no version {version} "
                f"(valid: {ProduceRequest.VALID_VERSIONS})")
        self.version = version
        self._flexible = flexible = version in ProduceRequest.FLEXIBLE_VERSIONS
        fixed = bytearray()
        P.write_nullable_string(fixed, client_id)
        if flexible:
            fixed.append(0)  # the header's tagged fields
            P.write_compact_string(fixed, transactional_id)
        else:
            P.write_nullable_string(fixed, transactional_id)
        fixed += _ACKS_TIMEOUT.pack(acks, timeout_ms)
        #: the frame after the correlation id, up to the topics
        self._fixed = bytes(fixed)
        #: each topic's encoded name (id from v13)
        self._names: dict[str | uuid.UUID, bytes] = {}
        self._part = _PART_V5 if version >= 5 else _PART_V3
        self._v8 = version >= 8

    def _name(self, topic: str | uuid.UUID) -> bytes:
        buf = bytearray()
        if self.version >= 13:
            if not isinstance(topic, uuid.UUID):
                raise TypeError(f"Produce v13 names topics by id, not {topic!r}")
            buf += topic.bytes
        elif not isinstance(topic, str):
            raise TypeError(f"Produce v{self.version} names topics by name, not {topic!r}")
        elif self._flexible:
            P.write_compact_string(buf, topic)
        else:
            P.write_nullable_string(buf, topic)
        name = self._names[topic] = bytes(buf)
        return name

    def frame(self, correlation_id: int, topics: ProduceTopics) -> bytes:
        """The whole request frame (size prefix, header, body) for ``topics``: the bytes
        ``encode_request`` writes for the same request."""
        names = self._names
        if self._flexible:
            if len(topics) == 1 and len(topics[0][1]) == 1:  # an awaited single send's
                topic, ((index, records),) = topics[0]
                name = names.get(topic) or self._name(topic)
                size = _uvarint(len(records) + 1)
                return b"".join((
                    _HEAD.pack(len(self._fixed) + len(name) + len(size) + len(records) + 17,
                               _API_KEY, self.version, correlation_id),
                    self._fixed, b"\x02", name, b"\x02", _INT32.pack(index), size, records,
                    b"\0\0\0"))  # the partition's, the topic's and the request's tags
            parts = [b"", self._fixed, _uvarint(len(topics) + 1)]
            for topic, partitions in topics:
                parts.append(names.get(topic) or self._name(topic))
                parts.append(_uvarint(len(partitions) + 1))
                for index, records in partitions:
                    parts.append(_INT32.pack(index) + _uvarint(len(records) + 1))
                    parts.append(records)
                    parts.append(b"\0")  # the partition's tagged fields
                parts.append(b"\0")  # the topic's
            parts.append(b"\0")  # the request's
        else:
            parts = [b"", self._fixed, _INT32.pack(len(topics))]
            for topic, partitions in topics:
                parts.append(names.get(topic) or self._name(topic))
                parts.append(_INT32.pack(len(partitions)))
                for index, records in partitions:
                    parts.append(_INDEX_SIZE.pack(index, len(records)))
                    parts.append(records)
        parts[0] = _HEAD.pack(sum(map(len, parts)) + 8, _API_KEY, self.version,
                              correlation_id)
        return b"".join(parts)

    def answers(self, frame: bytes) -> list[Answer]:
        """The answers of a response ``frame`` (without size prefix), in its order.

        Raises:
            CorruptMessageError: truncated or invalid bytes.
        """
        try:
            found = (_read_flexible(frame, self.version >= 13) if self._flexible
                     else _read_legacy(frame, self._part, self._v8))
        except (struct.error, IndexError, ValueError):  # bad bytes: the codec says which
            found = None
        if found is None:  # not the plain shape: the declared codec reads it, or says why not
            return answers_of(decode_response(ProduceResponse, self.version, frame)[1])
        return found


#: a flexible partition answer's end in the plain shape: no record errors, a null error
#: message, no tagged fields
_PLAIN_END = b"\x01\x00\x00"
#: and the topic's tagged fields (none) after its last partition
_PLAIN_ONE = _PLAIN_END + b"\x00"


def _read_flexible(data: bytes, by_id: bool) -> list[Answer] | None:
    """A flexible (v9+) response's answers in the plain shape; None for anything else."""
    # The header's tagged fields (none), then the topics' count: one varint byte.
    if data[4] or not 0 < data[5] < 0x80:
        return None
    if data[5] == 2 and not by_id:
        # One topic (an awaited single send's answer): its one partition's in the plain
        # shape, its tags and the response's none.
        n = data[6] - 1
        end = 8 + n
        if 0 <= n < 0x7F and data[end - 1] == 2 and \
                data[end + 30:end + 34] == _PLAIN_ONE and not data[end + 38]:
            index, code, base, append_time, _start = _PART_V5.unpack_from(data, end)
            return [(data[7:end - 1].decode(), None, index, code, base, append_time, None)]
    pos = 6
    out: list[Answer] = []
    unpack = _PART_V5.unpack_from
    for _ in range(data[5] - 1):
        topic_id = None
        if by_id:
            raw = data[pos:pos + 16]
            if raw != _ZERO_ID:
                topic_id = uuid.UUID(bytes=raw)
            name = ""
            pos += 16
        else:
            n = data[pos] - 1
            if not 0 <= n < 0x7F:
                return None
            name = data[pos + 1:pos + 1 + n].decode()
            pos += 1 + n
        count = data[pos] - 1
        if not 0 <= count < 0x7F:
            return None
        pos += 1
        for _ in range(count):
            index, code, base, append_time, _start = unpack(data, pos)
            pos += 30
            message = None
            if data[pos:pos + 3] != _PLAIN_END:
                # A message: no record errors, a message of one varint byte's length, no
                # tagged fields; anything else takes the declared codec.
                n = data[pos + 1] - 1
                if data[pos] != 1 or not 0 < n < 0x7F or data[pos + 2 + n]:
                    return None
                message = data[pos + 2:pos + 2 + n].decode()
                pos += n
            pos += 3
            out.append((name, topic_id, index, code, base, append_time, message))
        if data[pos]:  # the topic's tagged fields
            return None
        pos += 1
    # throttle_time_ms, then the response's tagged fields (none)
    if data[pos + 4]:
        return None
    return out


def _read_legacy(data: bytes, part: struct.Struct, v8: bool) -> list[Answer] | None:
    """A v3-8 response's answers; None for record errors or bad counts."""
    (topics,) = _INT32.unpack_from(data, 4)
    if topics < 0:
        return None
    pos = 8
    size = part.size
    out: list[Answer] = []
    for _ in range(topics):
        (n,) = _INT16.unpack_from(data, pos)
        if n < 0:
            return None
        name = data[pos + 2:pos + 2 + n].decode()
        pos += 2 + n
        (count,) = _INT32.unpack_from(data, pos)
        if count < 0:
            return None
        pos += 4
        for _ in range(count):
            fields = part.unpack_from(data, pos)
            pos += size
            message = None
            if v8:
                if _INT32.unpack_from(data, pos)[0]:  # record errors
                    return None
                (n,) = _INT16.unpack_from(data, pos + 4)
                pos += 6
                if n >= 0:
                    message = data[pos:pos + n].decode()
                    pos += n
            out.append((name, None, fields[0], fields[1], fields[2], fields[3], message))
    _INT32.unpack_from(data, pos)  # throttle_time_ms: the frame holds it
    return out


def answers_of(resp: Any) -> list[Answer]:
    """The answers of a decoded :class:`ProduceResponse`, as :meth:`ProduceWire.answers`
    gives them."""
    return [(t.name, t.topic_id if t.topic_id != P.ZERO_UUID else None, p.index, p.error_code,
             p.base_offset, p.log_append_time_ms, p.error_message)
            for t in resp.responses for p in t.partition_responses]
