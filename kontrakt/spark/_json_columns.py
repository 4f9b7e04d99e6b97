"""Confluent-framed JSON documents decoded into Arrow columns by Arrow's JSON reader.

The documents of a batch (registry prefix cut off) are joined into newline-delimited JSON and
read by ``pyarrow.json.read_json`` with the column's Arrow type as its explicit schema: C++
parsing straight into columns, no Python value per document. Properties the type does not
name are ignored; a missing property, or a null one, is a null; an integer is taken for a
``double``; any other value that does not fit its column (a string for a ``bigint``, a
fraction for a ``bigint``, an object for a ``string``) fails the batch, which is then
decoded document by document (``json.loads`` and the mapping's converter, the row path)
so that every record gets its own value or error.

What is validated: as Spark's ``from_json``, a document is checked against the column's
Spark type (each value must fit its column), not against the JSON Schema's other keywords
(``required``, ``minimum``, ``pattern``, ...). ``key.json.validate`` /
``value.json.validate`` = true also checks every document against the schema it was written
with, as Kontrakt's and Confluent's ``JSONDeserializer`` do; that decodes record by record
and costs about as much again as parsing (measured below).

Arrow's reader is lenient where a batch read must not be, so it is only handed a batch it
reads one row per record from: each document starts with ``{`` and holds no newline (Arrow
reads several objects from one line, skips blank lines, and crashes on a bare ``null``
line), and the rows must come out as many as the documents. Arrow does not check UTF-8, so
the array is validated in full afterwards. Maps (which Arrow's JSON reader cannot produce)
and non-object roots take the row path.

Measured in-process on the project machine (2 shared cores), a 6-property document with a
nested object and an array, 100,000 payloads: with the machine quiet (load < 3), Arrow's
reader 2.1-2.9 µs a record against about 24 µs for the row path (``json.loads`` 5-11 µs,
the compiled validator 8 µs, the converter 4 µs, ``pa.array`` 0.7 µs); busy (load 5-14,
``benchmarks/spark_decoders.py``), 5.8-15 µs against 30-250 µs.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.types import DataType

from kontrakt.errors import SerializationError
from kontrakt.serde import MessageField
from kontrakt.spark._arrow import Chunk, arrow_type
from kontrakt.spark._columns import (
    ColumnDecoder,
    Decoded,
    RowDecoder,
    _id_in_headers,
    _raw_array,
)

if TYPE_CHECKING:
    from kontrakt.registry import SchemaRegistryClient

__all__ = ["JsonColumnDecoder", "arrow_readable"]

log = logging.getLogger("kontrakt.spark")


class _NotArrowReadable(Exception):
    """The batch is not one Arrow's JSON reader reads one row per record from."""


def arrow_readable(kind: pa.DataType, root: bool = True) -> bool:
    """Whether Arrow's JSON reader produces ``kind`` (an object root, no maps)."""
    if pa.types.is_map(kind):
        return False
    if pa.types.is_struct(kind):
        return all(arrow_readable(f.type, False) for f in kind)
    if root:
        return False
    if pa.types.is_list(kind):
        return arrow_readable(kind.value_type, False)
    return True


_MAX_STOP = 2**31 - 1  # binary offsets are int32: no value is longer


class JsonColumnDecoder(ColumnDecoder):
    """``format=json``: Arrow's JSON reader for a whole batch, the row path for a batch it
    cannot take (see the module docstring).

    Args:
        client: the registry client (each schema id met is checked to be a JSON Schema's).
        data_type: the column's Spark type.
        rows: the row path (it validates when the option asks for it).
        validate: ``<key|value>.json.validate``: every document is validated against its
            writer schema, so the row path decodes every batch.
    """

    def __init__(self, client: SchemaRegistryClient | None, data_type: DataType,
                 rows: RowDecoder, validate: bool = False) -> None:
        self._client = client
        self._rows = rows
        self._type = arrow_type(data_type)
        self._arrow = not validate and arrow_readable(self._type)
        self._json_ids: dict[bytes, bool] = {}
        if self._arrow:
            import pyarrow.json as pj

            self._read_json = pj.read_json
            self._read_options = pj.ReadOptions
            self._parse = pj.ParseOptions(explicit_schema=pa.schema(list(self._type)),
                                          unexpected_field_behavior="ignore")
        #: batches decoded record by record (Arrow's reader could not take them)
        self.fallbacks = 0

    def decode(self, chunk: Chunk, field: MessageField) -> Decoded:
        if self._arrow and not _id_in_headers(chunk, field):
            try:
                return self._read(_raw_array(chunk, field)), {}
            except _NotArrowReadable as exc:
                log.debug("a batch of %d JSON records is decoded record by record: %s",
                          len(chunk), exc)
        self.fallbacks += 1
        return self._rows.decode(chunk, field)

    def decode_payloads(self, payloads: Sequence[Any],
                        field: MessageField = MessageField.VALUE) -> pa.Array:
        """Registry-framed JSON documents (None: a null) as one array of the column's type:
        the bytes-column → Arrow-array function an ``arrow_udf`` over a column of framed
        bytes can call.

        Raises:
            SerializationError: the first payload that is not a registry-framed JSON
                document of a JSON Schema id, or whose value does not fit the column (or,
                with validation, does not match its writer schema); the message names its
                index.
            SchemaRegistryError: a writer schema could not be fetched.
        """
        if self._arrow:
            try:
                return self._read(payloads)
            except _NotArrowReadable:
                pass
        array, errors = self._rows.decode_values(payloads, field)
        if errors:
            first = min(errors)
            raise SerializationError(f"payload {first} could not be decoded: "
                                     f"{errors[first]}") from errors[first]
        return array

    def _read(self, payloads: Sequence[Any] | pa.Array) -> pa.Array:
        """The documents through Arrow's JSON reader; the frames are stripped and the
        documents joined one a line by Arrow kernels, without a Python object a record."""
        arr = payloads if isinstance(payloads, pa.Array) else pa.array(payloads, pa.binary())
        if not pa.types.is_binary(arr.type):
            arr = arr.cast(pa.binary())
        n = len(arr)
        present = arr.drop_null() if arr.null_count else arr
        m = len(present)
        if not m:
            return pa.nulls(n, self._type)
        for prefix in pc.unique(pc.binary_slice(present, 0, 5)).to_pylist():
            self._check_prefix(prefix)
        # Each document and a newline, in one buffer: "doc\n" elements laid end to end. (The
        # slice's stop is given: pyarrow 26 fails without one on values of unequal lengths.)
        docs = pc.binary_slice(present, 5, _MAX_STOP)
        lines = pc.binary_join_element_wise(docs, b"", b"\n")
        offsets = memoryview(lines.buffers()[1]).cast("i")
        body = memoryview(lines.buffers()[2])[offsets[lines.offset]:
                                              offsets[lines.offset + m]].tobytes()
        # Every line one document that starts an object: Arrow gives each at least one row,
        # so m rows means exactly one each.
        if (not body.startswith(b"{") or body.count(b"\n") != m
                or body.count(b"\n{") != m - 1):
            raise _NotArrowReadable("a document that is not one line starting with '{'")
        try:
            table = self._read_json(
                pa.BufferReader(body),
                read_options=self._read_options(use_threads=False,
                                                block_size=max(len(body) + 1, 1 << 20)),
                parse_options=self._parse)
        except (pa.ArrowException, ValueError) as exc:
            raise _NotArrowReadable(f"{type(exc).__name__}: {exc}") from None
        if table.num_rows != m:
            raise _NotArrowReadable(f"{table.num_rows} rows from {m} documents")
        array = pa.StructArray.from_arrays([c.combine_chunks() for c in table.columns],
                                           fields=list(self._type))
        try:
            array.validate(full=True)  # Arrow's reader leaves invalid UTF-8 in strings
        except pa.ArrowInvalid as exc:
            raise _NotArrowReadable(str(exc)) from None
        if m == n:
            return array
        # Each present record's row: the running count of present records before it.
        valid = pc.is_valid(arr).cast(pa.int32())
        at = pc.if_else(pc.is_valid(arr), pc.subtract(pc.cumulative_sum(valid), 1), None)
        return array.take(at)

    def _check_prefix(self, prefix: bytes) -> None:
        """A registry prefix of a JSON Schema's id without data-contract rules (else the row
        path decodes the batch: it gives the error, or runs the rules)."""
        ok = self._json_ids.get(prefix)
        if ok is None:
            ok = len(prefix) == 5 and prefix[0] == 0 and self._client is not None
            if ok:
                assert self._client is not None
                try:
                    schema = self._client.get_schema(int.from_bytes(prefix[1:], "big"))
                except Exception as exc:  # unknown id, registry down: not remembered
                    raise _NotArrowReadable(f"schema of prefix {prefix.hex()}: {exc}") \
                        from None
                # Data-contract rules run in the registry deserializer: the row path.
                rules = schema.rule_set
                ok = schema.schema_type == "JSON" and (rules is None or not (
                    rules.migration_rules or rules.domain_rules or rules.encoding_rules))
            self._json_ids[prefix] = ok
        if not ok:
            raise _NotArrowReadable(f"prefix {prefix.hex()} is not a JSON Schema's")
