"""Kafka with Schema Registry decoding as a PySpark data source (format ``kontrakt``).

Needs the ``spark`` extra (``pip install 'kontrakt[spark]'``: PySpark 4 and PyArrow)::

    from kontrakt.spark import register

    register(spark)
    df = (spark.read.format("kontrakt")
          .option("kafka.bootstrap.servers", "127.0.0.1:9092")
          .option("subscribe", "orders")
          .option("schema.registry.url", "http://127.0.0.1:8081")
          .option("value.format", "avro")
          .load())
    (df.select("key", "value").write.format("kontrakt")
       .option("kafka.bootstrap.servers", "127.0.0.1:9092")
       .option("topic", "orders-copy")
       .option("schema.registry.url", "http://127.0.0.1:8081")
       .option("value.format", "avro").option("value.subject", "orders-value")
       .mode("append").save())

Reads and writes take the same formats (``avro``, ``json`` for JSON Schema, ``protobuf``,
``string``, ``binary``); a written column has the type a read of the subject's latest
schema gives. An avro write to a subject that has no schema yet registers one derived from
the column's Spark type (Spark's ``to_avro`` mapping; top record ``topLevelRecord`` unless
``value.avro.recordName`` / ``value.avro.namespace`` name it) unless
``auto.register.schemas`` is false; a json write likewise registers a draft-07 JSON Schema
derived from the column's type (the inverse of the read mapping: string, bigint, double,
boolean, arrays, maps with string keys and structs; other types are refused with their
column path). Protobuf's ``google.protobuf.Timestamp`` and ``Duration`` are
``timestamp`` and ``interval day to second`` columns, as Spark's own ``from_protobuf``
has them (to the microsecond). A read of several topics
(``subscribe`` = ``orders-eu,orders-us``) decodes each topic's records with its own
subject's latest schema (``orders-eu-value``, ``orders-us-value``); those schemas must map
to the same Spark type, or the query fails before reading; ``value.subjects`` (JSON
``{"topic": "subject"}``) names other subjects, and ``value.schema.version`` /
``value.schema.id`` pin the reader schema instead of the latest. JSON documents are checked
against the column's type, as Spark's ``from_json`` does (``value.json.validate=true``
validates them against their writer schema too). See :class:`KontraktDataSource` for the
options and columns.
"""

from __future__ import annotations

from typing import Any

from kontrakt._extras import raise_missing_extra

try:
    # Both, here: every submodule imports one or the other at its top.
    import pyarrow  # noqa: F401
    import pyspark.sql.datasource  # noqa: F401
except ModuleNotFoundError as exc:  # exercised with the package blocked, in a subprocess
    raise_missing_extra(exc, "kontrakt.spark (PySpark 4 and PyArrow)")

from kontrakt.spark._mapping import UnsupportedSchemaError
from kontrakt.spark._source import KontraktDataSource
from kontrakt.spark._types import avro_to_spark_type

__all__ = ["KontraktDataSource", "UnsupportedSchemaError", "avro_to_spark_type", "register"]


def register(spark: Any) -> None:
    """Register the ``kontrakt`` format with a SparkSession (``spark.dataSource.register``).

    Args:
        spark: the ``pyspark.sql.SparkSession``.
    """
    spark.dataSource.register(KontraktDataSource)
