"""Reading a record set: the ``records`` bytes of a Fetch response partition.

A record set is a sequence of v2 batches and/or legacy messages, each starting with
``offset int64 | length int32`` and having its magic byte at position 16. A broker may cut the
last batch short (it fills the fetch size with whole segments of the log); such a trailing
partial batch is skipped, as the Java client does. A record set that is not empty but holds no
complete batch means the peer sent something unusable (brokers since Kafka 0.10.1 always
return at least one whole batch), and is reported instead of silently yielding nothing.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from typing import Final, TypeAlias

from kontrakt.errors import CorruptRecordError
from kontrakt.protocol.records._batch import RecordBatch
from kontrakt.protocol.records._legacy import MIN_MESSAGE_SIZE, LegacyBatch
from kontrakt.protocol.records._model import Buffer, Record

__all__ = ["AnyBatch", "RecordSetReader", "iter_batches", "read_records"]

AnyBatch: TypeAlias = RecordBatch | LegacyBatch

_OFFSET_LENGTH: Final = struct.Struct(">qi")
_LOG_OVERHEAD: Final = 12
_MAGIC_OFFSET: Final = 16


class RecordSetReader:
    """Iterates the batches of a record set.

    Attributes:
        truncated_bytes: after iteration, the size of the partial trailing batch that was
            skipped (0 when the set ended cleanly).
    """

    __slots__ = ("_check_crcs", "_data", "_max_batch_size", "_partition", "_require_progress",
                 "_topic", "truncated_bytes")

    def __init__(
        self,
        data: Buffer,
        *,
        check_crcs: bool = True,
        topic: str | None = None,
        partition: int | None = None,
        max_batch_size: int | None = None,
        require_progress: bool = True,
    ) -> None:
        """Prepare to read ``data`` (copied once to ``bytes`` unless it already is).

        Args:
            data: the record set bytes.
            check_crcs: validate every batch's CRC (CRC-32C for v2, CRC-32 for legacy).
            topic, partition: named in every error raised.
            max_batch_size: a batch whose length field exceeds this is corrupt (guards against
                a garbage length being waited for as a "partial" batch); None: no limit.
            require_progress: raise when ``data`` is not empty but holds no complete batch.
        """
        self._data = data if isinstance(data, bytes) else bytes(data)
        self._check_crcs = check_crcs
        self._topic = topic
        self._partition = partition
        self._max_batch_size = max_batch_size
        self._require_progress = require_progress
        self.truncated_bytes = 0

    def _error(self, message: str, offset: int | None) -> CorruptRecordError:
        return CorruptRecordError(message, topic=self._topic, partition=self._partition,
                                  offset=offset)

    def __iter__(self) -> Iterator[AnyBatch]:
        """Yield each complete batch in order.

        Raises:
            CorruptRecordError: a length field below the minimum or above
                ``max_batch_size``, an unknown magic, a CRC mismatch, a malformed header, or
                (with ``require_progress``) no complete batch at all.
        """
        data = self._data
        size = len(data)
        pos = 0
        topic = self._topic
        partition = self._partition
        check = self._check_crcs
        limit = self._max_batch_size
        found = False
        while pos < size:
            if size - pos < _LOG_OVERHEAD:
                break
            offset, length = _OFFSET_LENGTH.unpack_from(data, pos)
            if length < MIN_MESSAGE_SIZE[0]:
                raise self._error(f"batch length {length} is below the minimum", offset)
            if limit is not None and length > limit:
                raise self._error(f"batch length {length} exceeds the maximum of {limit}",
                                  offset)
            if size - pos <= _MAGIC_OFFSET:
                break
            magic = data[pos + _MAGIC_OFFSET]
            if magic > 2:
                raise self._error(f"unknown magic byte {magic}", offset)
            if size - pos < _LOG_OVERHEAD + length:
                break
            batch: AnyBatch
            if magic == 2:
                batch = RecordBatch(data, pos, topic=topic, partition=partition)
            else:
                batch = LegacyBatch(data, pos, topic=topic, partition=partition)
            if check:
                batch.validate_crc()
            found = True
            pos += _LOG_OVERHEAD + length
            yield batch
        self.truncated_bytes = size - pos
        if pos < size and not found and self._require_progress:
            raise self._error(
                f"record set of {size} bytes holds no complete batch (first batch claims "
                f"{_OFFSET_LENGTH.unpack_from(data, 0)[1] if size >= 12 else '?'} bytes)",
                None,
            )


def iter_batches(
    data: Buffer,
    *,
    check_crcs: bool = True,
    topic: str | None = None,
    partition: int | None = None,
    max_batch_size: int | None = None,
    require_progress: bool = True,
) -> Iterator[AnyBatch]:
    """Iterate the batches of a record set; see :class:`RecordSetReader` for the arguments.

    Returns:
        An iterator of :class:`RecordBatch` (magic 2) and :class:`LegacyBatch` (magic 0/1).

    Raises:
        CorruptRecordError: see :meth:`RecordSetReader.__iter__`.
    """
    return iter(RecordSetReader(data, check_crcs=check_crcs, topic=topic, partition=partition,
                                max_batch_size=max_batch_size,
                                require_progress=require_progress))


def read_records(
    data: Buffer,
    *,
    check_crcs: bool = True,
    topic: str | None = None,
    partition: int | None = None,
    include_control: bool = False,
) -> list[Record]:
    """Decode every record of a record set (convenience for tests and simple tools).

    Args:
        data: record set bytes.
        check_crcs: validate CRCs.
        topic, partition: named in errors.
        include_control: also return the records of control batches.

    Returns:
        All records in offset order.

    Raises:
        CorruptRecordError, UnsupportedCodecError: malformed input.
    """
    out: list[Record] = []
    for batch in iter_batches(data, check_crcs=check_crcs, topic=topic, partition=partition):
        if batch.is_control and not include_control:
            continue
        out.extend(batch.records())
    return out
