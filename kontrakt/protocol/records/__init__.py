"""Kafka record batches, sans-I/O.

* :class:`RecordBatchBuilder` builds v2 (magic 2) batches: varint records with headers,
  timestamps, idempotence fields, transactional flag and compression.
* :class:`RecordSetReader` / :func:`iter_batches` walk a Fetch response's ``records`` bytes,
  yielding :class:`RecordBatch` (v2) and :class:`LegacyBatch` (magic 0/1) objects whose
  ``records()`` return :class:`Record` tuples.
* :func:`build_control_batch` / :func:`parse_control_record` for transaction markers.
* :func:`compress` / :func:`decompress` for the codecs (gzip, snappy, lz4, zstd via cramjam).
"""

from __future__ import annotations

from kontrakt.protocol.records._batch import BATCH_HEADER_SIZE, RecordBatch
from kontrakt.protocol.records._builder import RecordBatchBuilder
from kontrakt.protocol.records._compression import (
    DEFAULT_LEVELS,
    CompressionType,
    compress,
    decompress,
)
from kontrakt.protocol.records._control import (
    ControlRecord,
    ControlRecordType,
    build_control_batch,
    parse_control_record,
)
from kontrakt.protocol.records._decode import decode_records_piece_as
from kontrakt.protocol.records._legacy import LegacyBatch, LegacyMessageSetBuilder
from kontrakt.protocol.records._model import Header, Record, TimestampType
from kontrakt.protocol.records._reader import (
    AnyBatch,
    RecordSetReader,
    iter_batches,
    read_records,
)

__all__ = [
    "BATCH_HEADER_SIZE",
    "DEFAULT_LEVELS",
    "AnyBatch",
    "CompressionType",
    "ControlRecord",
    "ControlRecordType",
    "Header",
    "LegacyBatch",
    "LegacyMessageSetBuilder",
    "Record",
    "RecordBatch",
    "RecordBatchBuilder",
    "RecordSetReader",
    "TimestampType",
    "build_control_batch",
    "compress",
    "decode_records_piece_as",
    "decompress",
    "iter_batches",
    "parse_control_record",
    "read_records",
]
