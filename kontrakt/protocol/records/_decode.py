"""Decoding the records of a v2 batch (magic 2): the record loop (the batch around them:
:mod:`._batch`).

Record layout::

    record: length varint | attributes int8 | timestampDelta varlong | offsetDelta varint |
            keyLength varint | key | valueLength varint | value | headerCount varint |
            (keyLength varint | key utf-8 | valueLength varint | value) * headerCount

Decoding is written for speed: the varint tables of :mod:`._model`, hand-unrolled varint
reads, and records as plain named tuples (or, for a consumer, its own tuple-based record
type, built in the same pass). The loop is one source template compiled into three
functions: :func:`decode_records`, :func:`decode_records_as` and
:func:`decode_records_piece_as`.
"""

from __future__ import annotations

from collections.abc import Callable
from itertools import repeat
from typing import Any, Final, TypeVar

from kontrakt.errors import CorruptRecordError
from kontrakt.protocol.records._decode_run import MIN_RUN, decode_run
from kontrakt.protocol.records._decode_varying import MIN_STRETCH, decode_varying
from kontrakt.protocol.records._model import (
    TWO_BYTE_VARINTS,
    ZIGZAG_DECODE,
    Header,
    Record,
    decode_varint_slow,
)

__all__ = ["decode_records", "decode_records_as", "decode_records_piece_as"]

_new_record = tuple.__new__
_T = TypeVar("_T", bound=tuple[Any, ...])


_TWO_BYTE_VARINTS: Final = TWO_BYTE_VARINTS

# The record loop is written once, as source text, and compiled into two functions that
# differ only in what they build per record: plain :class:`Record` tuples, or the caller's
# record type (a tuple subclass laid out like ``kontrakt.ConsumerRecord``) with the topic,
# partition and leader epoch filled in, so a consumer builds each record exactly once.
_LOOP_TEMPLATE = """
def {name}(data, pos, end, count, base_offset, base_timestamp, timestamp_type, max_timestamp,
           {extra}):
    zz = ZIGZAG_DECODE
    hi = TWO_BYTE_VARINTS
    slow = decode_varint_slow
    new = _new_record
    out = []
    append = out.append
    n_headers = 0
    retry = 0  # where a run (see decode_run) is tried next
    backoff = MIN_RUN
    # The most records a stretch (decode_varying) looks at: it finds every record end in
    # reach before it checks them, so stretches cut by records with headers now and then
    # would each walk the rest of the batch (a header every 50 records cost 10x). The
    # whole batch at first; after a cut, twice that stretch's length, doubled while
    # stretches fill it.
    window = count
    try:
        while (done := len(out)) < count:
            if done >= retry:
                run = decode_run(data, pos, end, count - done, base_offset, base_timestamp)
                if run is None:
                    run = decode_varying(data, pos, end, min(count - done, window),
                                         base_offset, base_timestamp)
                    if run is not None:
                        window = (window * 2 if run[0] >= window
                                  else max(2 * MIN_STRETCH, run[0] * 2))
                if run is not None:
                    n, pos, offsets, timestamps, keys, values, headers = run
                    out += map(new, repeat({cls}), zip({run_fields}))
                    retry = done + n
                    backoff = MIN_RUN
                    continue
                # Not a run here: the general loop takes the next records, more of them
                # after every miss, so that records of varying sizes pay little for it.
                retry = done + backoff
                backoff *= 2
            for _ in range(min(count, retry) - done):
                # Every varint read below is the same three-way unrolled pattern: one
                # byte (table), two bytes (table of tables, None when a third byte
                # follows), otherwise the generic loop. Unrolled by hand because a helper
                # call per varint would cost more than the decoding.
                # Record length, then (pos + 1) skip the attributes byte, unused so far.
                b = data[pos]
                if b < 128:
                    rec_end = pos + 1 + zz[b]
                    b = data[pos + 2]
                    pos += 2
                elif (c := hi[b][data[pos + 1]]) is not None:
                    rec_end = pos + 2 + c
                    b = data[pos + 3]
                    pos += 3
                else:
                    length, pos = slow(data, pos)
                    rec_end = pos + length
                    pos += 1
                    b = data[pos]
                # b: the first byte of the timestamp delta
                if b < 128:
                    timestamp = base_timestamp + zz[b]
                    pos += 1
                elif (c := hi[b][data[pos + 1]]) is not None:
                    timestamp = base_timestamp + c
                    pos += 2
                else:
                    timestamp, pos = slow(data, pos)
                    timestamp += base_timestamp
                b = data[pos]
                if b < 128:
                    offset = base_offset + zz[b]
                    pos += 1
                elif (c := hi[b][data[pos + 1]]) is not None:
                    offset = base_offset + c
                    pos += 2
                else:
                    offset, pos = slow(data, pos)
                    offset += base_offset
                b = data[pos]
                if b == 1:  # length -1: no key (the common case, so tested first)
                    key = None
                    pos += 1
                else:
                    if b < 128:
                        n = zz[b]
                        pos += 1
                    elif (c := hi[b][data[pos + 1]]) is not None:
                        n = c
                        pos += 2
                    else:
                        n, pos = slow(data, pos)
                    if n < 0:
                        raise CorruptRecordError(f"negative key length {{n}}")
                    key = data[pos:pos + n]
                    pos += n
                b = data[pos]
                if b < 128:
                    n = zz[b]
                    pos += 1
                elif (c := hi[b][data[pos + 1]]) is not None:
                    n = c
                    pos += 2
                else:
                    n, pos = slow(data, pos)
                if n >= 0:
                    value = data[pos:pos + n]
                    pos += n
                elif n == -1:
                    value = None
                else:
                    raise CorruptRecordError(f"negative value length {{n}}")
                if data[pos] == 0:
                    headers = []
                    pos += 1
                else:
                    headers, pos = _decode_headers(data, pos)
                    {count_headers}
                if pos != rec_end:
                    raise CorruptRecordError(
                        f"record fields end {{pos - rec_end:+d}} bytes from where its length "
                        "says")
                append(new({cls}, ({fields})))
    except IndexError:
        raise CorruptRecordError(
            f"record {{len(out)}} of {{count}} runs past the batch") from None
{check_end}
    if timestamp_type == 1:
        # Rare (topics with LogAppendTime): every record takes the batch's append time. Done
        # afterwards so the hot loop has no branch for it.
        out = [new({cls}, ({log_append_fields})) for r in out]
    return {result}
"""

# A piece stops early, after the record that takes its headers past ``max_headers``: in the
# header branch, so that records without headers pay nothing for it.
_COUNT_HEADERS = """n_headers += len(headers)
                    if n_headers > max_headers:
                        if pos != rec_end:
                            raise CorruptRecordError(
                                f"record fields end {{pos - rec_end:+d}} bytes from where "
                                "its length says")
                        append(new({cls}, ({fields})))
                        count = -1  # ends the outer loop too; not read after it
                        break"""

_CHECK_END = """    if pos != end:
        raise CorruptRecordError(
            f"batch holds {end - pos} bytes after its {count} records" if pos < end
            else f"records of the batch run {pos - end} bytes past its end"
        )"""


def _compile_loop(name: str, extra: str, cls: str, fields: str, run_fields: str,
                  log_append_fields: str, *, piece: bool = False) -> Callable[..., Any]:
    # A piece decodes ``count`` records of a batch and says where it stopped and how many
    # headers it built (they cost memory that the bytes do not show); the caller checks
    # the batch's end once its last piece is decoded.
    source = _LOOP_TEMPLATE.format(
        name=name, extra=extra, cls=cls, fields=fields, run_fields=run_fields,
        log_append_fields=log_append_fields,
        count_headers=_COUNT_HEADERS.format(cls=cls, fields=fields) if piece else "pass",
        check_end="" if piece else _CHECK_END, result="out, pos, n_headers" if piece else "out")
    namespace: dict[str, Any] = {
        "ZIGZAG_DECODE": ZIGZAG_DECODE, "TWO_BYTE_VARINTS": _TWO_BYTE_VARINTS,
        "decode_varint_slow": decode_varint_slow,
        "_new_record": _new_record, "_decode_headers": _decode_headers,
        "CorruptRecordError": CorruptRecordError, "Record": Record,
        "decode_run": decode_run, "decode_varying": decode_varying, "MIN_RUN": MIN_RUN,
        "MIN_STRETCH": MIN_STRETCH,
        "repeat": repeat,
    }
    exec(compile(source, f"<kontrakt record loop {name}>", "exec"), namespace)
    fn: Callable[..., Any] = namespace[name]
    return fn


def decode_records(
    data: bytes,
    pos: int,
    end: int,
    count: int,
    base_offset: int,
    base_timestamp: int,
    timestamp_type: int,
    max_timestamp: int,
) -> list[Record]:
    """Decode ``count`` v2 records from ``data[pos:end]``.

    Args:
        data: buffer holding the records (the batch blob, or the decompressed payload).
        pos, end: where the records start and end in ``data``.
        count: the batch's record count.
        base_offset, base_timestamp, max_timestamp: from the batch header.
        timestamp_type: 0 create time, 1 log append time (every record then gets
            ``max_timestamp``).

    Returns:
        The records in order.

    Raises:
        CorruptRecordError: the bytes do not hold exactly ``count`` well-formed records
            (no location attached; :class:`RecordBatch` adds it).
    """
    return _decode_plain(data, pos, end, count, base_offset, base_timestamp, timestamp_type,
                         max_timestamp)


def decode_records_as(
    data: bytes,
    pos: int,
    end: int,
    count: int,
    base_offset: int,
    base_timestamp: int,
    timestamp_type: int,
    max_timestamp: int,
    record_type: type[_T],
    topic: str,
    partition: int,
    timestamp_type_value: object,
    leader_epoch: int,
) -> list[_T]:
    """Like :func:`decode_records`, but build ``record_type`` instances directly.

    ``record_type`` must be a tuple subclass laid out as ``(topic, partition, offset,
    timestamp, timestamp_type, key, value, headers, leader_epoch)`` (the layout of
    :class:`kontrakt.ConsumerRecord`); instances are made with ``tuple.__new__``, skipping
    its constructor, so a consumer builds each record once and in one pass.

    Args:
        data, pos, end, count, base_offset, base_timestamp, timestamp_type, max_timestamp:
            as for :func:`decode_records`.
        record_type: the tuple subclass to build.
        topic, partition, leader_epoch: stored in every record.
        timestamp_type_value: stored in every record as its timestamp type (e.g. an enum
            member matching ``timestamp_type``).

    Returns:
        The records in order.

    Raises:
        CorruptRecordError: see :func:`decode_records`.
    """
    return _decode_as(data, pos, end, count, base_offset, base_timestamp, timestamp_type,
                      max_timestamp, record_type, topic, partition, timestamp_type_value,
                      leader_epoch)


def decode_records_piece_as(
    data: bytes,
    pos: int,
    end: int,
    count: int,
    base_offset: int,
    base_timestamp: int,
    timestamp_type: int,
    max_timestamp: int,
    record_type: type[_T],
    topic: str,
    partition: int,
    timestamp_type_value: object,
    leader_epoch: int,
    max_headers: int,
) -> tuple[list[_T], int, int]:
    """Decode up to the next ``count`` records of a batch, as :func:`decode_records_as` does.

    A large batch can so be decoded a bounded piece at a time: each call starts at ``pos``
    (the batch's first record, or where the previous piece stopped) and ``end`` only bounds
    the reads. Once the batch's last piece is decoded, the caller checks that it stopped
    exactly at ``end`` (:func:`decode_records_as` does that itself). The piece stops early,
    after fewer records, once they hold more than ``max_headers`` headers (headers cost
    memory that their few bytes do not show).

    Returns:
        (the records, where the next record starts, how many headers the records hold).

    Raises:
        CorruptRecordError: a record is malformed or runs past ``end`` (no location
            attached).
    """
    return _decode_piece_as(data, pos, end, count, base_offset, base_timestamp,
                            timestamp_type, max_timestamp, record_type, topic, partition,
                            timestamp_type_value, leader_epoch, max_headers)


def _decode_headers(data: bytes, pos: int) -> tuple[list[Header], int]:
    """A record's headers at ``pos`` (its header count): (headers, where they end).

    The varints are read as the record loop reads them (one- and two-byte tables, a call
    only for longer ones): a call per varint cost more than the rest of a header. Bytes
    that run short are read again by :func:`_decode_headers_checked`, which says where.
    """
    zz = ZIGZAG_DECODE
    hi: Any = TWO_BYTE_VARINTS
    start = pos
    try:
        b = data[pos]
        if b < 128:
            count = zz[b]
            pos += 1
        else:
            count, pos = decode_varint_slow(data, pos)
        if count < 0:
            raise CorruptRecordError(f"negative header count {count}")
        headers: list[Header] = []
        append = headers.append
        size = len(data)
        for _ in range(count):
            b = data[pos]
            if b < 128:
                n = zz[b]
                pos += 1
            elif (c := hi[b][data[pos + 1]]) is not None:
                n = c
                pos += 2
            else:
                n, pos = decode_varint_slow(data, pos)
            if n < 0 or pos + n > size:
                raise CorruptRecordError(f"bad header key length {n}")
            try:
                name = data[pos:pos + n].decode("utf-8")
            except UnicodeDecodeError as exc:
                raise CorruptRecordError(f"header key is not UTF-8: {exc}") from None
            pos += n
            b = data[pos]
            if b < 128:
                n = zz[b]
                pos += 1
            elif (c := hi[b][data[pos + 1]]) is not None:
                n = c
                pos += 2
            else:
                n, pos = decode_varint_slow(data, pos)
            if n >= 0:
                if pos + n > size:
                    raise CorruptRecordError(f"header value of {n} bytes runs past the batch")
                append((name, data[pos:pos + n]))
                pos += n
            elif n == -1:
                append((name, None))
            else:
                raise CorruptRecordError(f"negative header value length {n}")
    except IndexError:
        return _decode_headers_checked(data, start)
    return headers, pos


def _decode_headers_checked(data: bytes, pos: int) -> tuple[list[Header], int]:
    count, pos = decode_varint_slow(data, pos)
    if count < 0:
        raise CorruptRecordError(f"negative header count {count}")
    headers: list[Header] = []
    size = len(data)
    for _ in range(count):
        n, pos = decode_varint_slow(data, pos)
        if n < 0 or pos + n > size:
            raise CorruptRecordError(f"bad header key length {n}")
        try:
            name = data[pos:pos + n].decode("utf-8")
        except UnicodeDecodeError as exc:
            raise CorruptRecordError(f"header key is not UTF-8: {exc}") from None
        pos += n
        n, pos = decode_varint_slow(data, pos)
        if n >= 0:
            if pos + n > size:
                raise CorruptRecordError(f"header value of {n} bytes runs past the batch")
            headers.append((name, data[pos:pos + n]))
            pos += n
        elif n == -1:
            headers.append((name, None))
        else:
            raise CorruptRecordError(f"negative header value length {n}")
    return headers, pos


_RUN_FIELDS_AS = ("repeat(topic), repeat(partition), offsets, timestamps, repeat(ts_value), "
                  "keys, values, headers, repeat(leader_epoch)")
_decode_plain: Callable[..., list[Any]] = _compile_loop(
    "decode_records", "", "Record",
    "offset, timestamp, timestamp_type, key, value, headers",
    "offsets, timestamps, repeat(timestamp_type), keys, values, headers",
    "r[0], max_timestamp, 1, r[3], r[4], r[5]")
_decode_as: Callable[..., list[Any]] = _compile_loop(
    "decode_records_as", "rec_cls, topic, partition, ts_value, leader_epoch", "rec_cls",
    "topic, partition, offset, timestamp, ts_value, key, value, headers, leader_epoch",
    _RUN_FIELDS_AS,
    "r[0], r[1], r[2], max_timestamp, r[4], r[5], r[6], r[7], r[8]")
_decode_piece_as: Callable[..., tuple[list[Any], int, int]] = _compile_loop(
    "decode_records_piece_as", "rec_cls, topic, partition, ts_value, leader_epoch, max_headers",
    "rec_cls",
    "topic, partition, offset, timestamp, ts_value, key, value, headers, leader_epoch",
    _RUN_FIELDS_AS,
    "r[0], r[1], r[2], max_timestamp, r[4], r[5], r[6], r[7], r[8]", piece=True)

