"""Control records: the transaction markers (commit / abort) brokers write into control batches.

A control record's key is ``version int16 | type int16`` (type 0 = abort, 1 = commit; KRaft
uses further types in its metadata log); an end-transaction marker's value is
``version int16 | coordinatorEpoch int32``.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from enum import IntEnum
from typing import Final

from kontrakt.errors import CorruptRecordError
from kontrakt.protocol.records._builder import RecordBatchBuilder
from kontrakt.protocol.records._model import Record

__all__ = ["ControlRecord", "ControlRecordType", "build_control_batch", "parse_control_record"]

_KEY: Final = struct.Struct(">hh")
_MARKER_VALUE: Final = struct.Struct(">hi")


class ControlRecordType(IntEnum):
    """Known control record types (others are kept as plain ints)."""

    ABORT = 0
    COMMIT = 1
    LEADER_CHANGE = 2
    SNAPSHOT_HEADER = 3
    SNAPSHOT_FOOTER = 4


@dataclass(frozen=True, slots=True)
class ControlRecord:
    """A decoded control record.

    Attributes:
        offset: offset of the marker.
        version: key version (0 today).
        type: :class:`ControlRecordType` value (an int for unknown types).
        coordinator_epoch: from an abort/commit marker's value, else -1.
        value: the raw value (for types other than abort/commit).
    """

    offset: int
    version: int
    type: int
    coordinator_epoch: int = -1
    value: bytes | None = None

    @property
    def is_commit(self) -> bool:
        """True for a transaction commit marker."""
        return self.type == ControlRecordType.COMMIT

    @property
    def is_abort(self) -> bool:
        """True for a transaction abort marker."""
        return self.type == ControlRecordType.ABORT


def parse_control_record(record: Record) -> ControlRecord:
    """Interpret a record of a control batch.

    Args:
        record: a record from a batch whose ``is_control`` is true.

    Returns:
        The control record.

    Raises:
        CorruptRecordError: the key is missing or shorter than 4 bytes, or a commit/abort
            value is shorter than 6 bytes.
    """
    key = record.key
    if key is None or len(key) < _KEY.size:
        raise CorruptRecordError("control record key is missing or too short",
                                 offset=record.offset)
    version, ctype = _KEY.unpack_from(key)
    epoch = -1
    value = record.value
    if ctype in (ControlRecordType.ABORT, ControlRecordType.COMMIT):
        if value is None or len(value) < _MARKER_VALUE.size:
            raise CorruptRecordError("transaction marker value is missing or too short",
                                     offset=record.offset)
        _, epoch = _MARKER_VALUE.unpack_from(value)
    return ControlRecord(record.offset, version, ctype, epoch, value)


def build_control_batch(
    control_type: ControlRecordType | int,
    *,
    producer_id: int,
    producer_epoch: int,
    base_offset: int = 0,
    coordinator_epoch: int = 0,
    timestamp: int | None = None,
    partition_leader_epoch: int = -1,
    version: int = 0,
) -> bytes:
    """Build a control batch holding one commit or abort marker, as a broker writes it.

    Used to craft Fetch responses in tests (read-committed consumers, transaction aborts).

    Args:
        control_type: ABORT or COMMIT (other types get an empty-marker value).
        producer_id, producer_epoch: the transactional producer the marker ends.
        base_offset: offset of the marker.
        coordinator_epoch: the transaction coordinator's epoch.
        timestamp: marker timestamp in ms, None for now.
        partition_leader_epoch: leader epoch to stamp on the batch.
        version: control key/value version.

    Returns:
        The batch bytes (transactional and control bits set).
    """
    builder = RecordBatchBuilder(
        base_offset=base_offset, producer_id=producer_id, producer_epoch=producer_epoch,
        is_transactional=True, is_control=True, partition_leader_epoch=partition_leader_epoch,
    )
    builder.append(timestamp, _KEY.pack(version, int(control_type)),
                   _MARKER_VALUE.pack(version, coordinator_epoch))
    return builder.build()
