"""Splitting a batch the broker refused as too large (MESSAGE_TOO_LARGE, KIP-126).

A broker refuses a batch larger than its ``message.max.bytes`` (or the topic's
``max.message.bytes``) whole. Like the Java client, the producer then splits the batch and
sends the parts; unlike it, in halves by bytes (the Java client cuts to ``batch.size``, which
only helps when its compression estimate was off: our batches never exceed ``batch.size``
uncompressed, so a limit below it needs smaller parts), and a part refused again is halved
again, until a record refused alone fails alone with RecordTooLargeError.

The facts kept from the Java client: the parts keep the batch's creation time (so its
``delivery.timeout.ms`` deadline), go back at the front of the partition's queue in order,
start with no attempts counted, and when the batch had sequence numbers, take its producer
id, epoch and sequence range in order (the first part the batch's base sequence, the next
one that plus the first part's record count), so the sequence numbers of the batches sent
after it stay right.

The record futures keep pointing at the refused batch: it resolves once all of its parts
have (see ProducerBatch.part), each record with the outcome of its part.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kontrakt.clients.producer._records import renumbered
from kontrakt.protocol.records import BATCH_HEADER_SIZE
from kontrakt.protocol.records._model import decode_varint_slow

if TYPE_CHECKING:
    from kontrakt.clients.producer._batch import ProducerBatch

__all__ = ["cut_records", "split_batch"]

_SEQ_MOD = 1 << 31


def _parse(records: bytes) -> list[tuple[int, int, int, int, int]]:
    """Each v2 record of ``records``: (timestamp delta, where its body starts, where its
    offset delta starts, where that ends, where the record ends)."""
    out = []
    pos = 0
    n = len(records)
    while pos < n:
        length, body = decode_varint_slow(records, pos)
        pos = body + length
        # attributes (one byte), timestamp delta (varlong), offset delta (varint), the rest
        ts_delta, offset_at = decode_varint_slow(records, body + 1)
        _, rest_at = decode_varint_slow(records, offset_at)
        out.append((ts_delta, body, offset_at, rest_at, pos))
    return out


def cut_records(records: bytes, count: int) -> list[tuple[bytes, int, int]]:
    """Cut the ``count`` v2 records of a batch (their offset deltas 0..count-1) into two runs
    of about half the bytes each, at least one record each.

    Returns:
        Two (records, record count, largest timestamp delta), the second's offset deltas
        renumbered from 0. Timestamp deltas stay relative to the batch's base timestamp.

    Raises:
        ValueError: fewer than two records, or ``count`` does not match the bytes.
        CorruptRecordError: the bytes are not v2 records.
    """
    parsed = _parse(records)
    if len(parsed) != count or count < 2:
        raise ValueError(f"cannot cut {len(parsed)} record(s) (expected {count}) in two")
    half = len(records) // 2
    k = 1
    while k < count - 1 and parsed[k - 1][4] < half:
        k += 1
    second = renumbered(records, [r[1:] for r in parsed[k:]])
    return [(records[:parsed[k - 1][4]], k, max(r[0] for r in parsed[:k])),
            (second, count - k, max(r[0] for r in parsed[k:]))]


def split_batch(batch: ProducerBatch) -> list[ProducerBatch] | None:
    """Two batches holding ``batch``'s records in order (see the module docstring), or None
    when it cannot be split: one record, or built whole by the caller (``send_batch``: its
    records are the caller's unit). The caller holds the accumulator's lock and queues them.
    """
    from kontrakt.clients.producer._batch import ProducerBatch

    if batch.builder is not None or batch.count < 2 or batch.done:
        return None
    halves = cut_records(batch.joined(), batch.count)
    parts = []
    sequence = batch.base_sequence
    for records, count, max_delta in halves:
        part = ProducerBatch(batch.acc, batch.topic, batch.partition, None, batch.created)
        part.parts = [records]
        part.count = count
        part.size = BATCH_HEADER_SIZE + len(records)
        part.base_timestamp = batch.base_timestamp
        part.max_timestamp = batch.base_timestamp + max_delta
        part.sealed = part.urgent = True
        part.cause = batch.cause
        part.parent = batch
        if sequence >= 0:
            part.base_sequence = sequence
            part.producer_id, part.producer_epoch = batch.producer_id, batch.producer_epoch
            sequence = (sequence + count) % _SEQ_MOD
        parts.append(part)
    return parts
