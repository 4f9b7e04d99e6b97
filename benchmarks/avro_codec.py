"""Avro per-record cost in process: kontrakt's AvroSerializer / AvroDeserializer next to
confluent-kafka's and fastavro's own calls, on the 11-field ``Trade`` record of
``benchmarks/serde.py`` (registry lookups warmed up first, interleaved rounds, best round).

The ``kontrakt`` package is the one on ``PYTHONPATH`` (the repository root is only appended),
so the same script measures another checkout, e.g. the commit before the compiled codec:

    PYTHONPATH=$PWD .venv/bin/python benchmarks/avro_codec.py [--rounds 15] [--ops 2000]
    git worktree add /tmp/before <commit>
    PYTHONPATH=/tmp/before .venv/bin/python benchmarks/avro_codec.py
"""

from __future__ import annotations

import argparse
import io
import json
import os
import sys
import warnings

import fastavro

from kontrakt.registry import MockSchemaRegistryClient
from kontrakt.serde import AvroDeserializer, AvroSerializer, MessageField, SerializationContext

sys.path.append(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from benchmarks.serde import AVRO, RECORD, bench

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from confluent_kafka.schema_registry import avro as cavro
    from confluent_kafka.schema_registry import topic_subject_name_strategy as c_topic
    from confluent_kafka.schema_registry._sync.mock_schema_registry_client import (
        MockSchemaRegistryClient as ConfluentMock,
    )
    from confluent_kafka.serialization import MessageField as CField
    from confluent_kafka.serialization import SerializationContext as CContext


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--ops", type=int, default=2000)
    args = parser.parse_args()

    ctx = SerializationContext("trades", MessageField.VALUE)
    cctx = CContext("trades", CField.VALUE)
    ours = MockSchemaRegistryClient({"url": "mock://bench"})
    theirs = ConfluentMock({"url": "mock://bench"})
    k_ser, k_de = AvroSerializer(ours, json.dumps(AVRO)), AvroDeserializer(ours)
    c_ser = cavro.AvroSerializer(theirs, json.dumps(AVRO),
                                 conf={"subject.name.strategy": c_topic})
    c_de = cavro.AvroDeserializer(theirs, conf={"subject.name.strategy": c_topic})
    k_bytes, c_bytes = k_ser(RECORD, ctx), c_ser(RECORD, cctx)
    assert k_bytes is not None and k_bytes[5:] == c_bytes[5:]
    assert k_de(k_bytes, ctx) == c_de(c_bytes, cctx) == RECORD
    parsed = fastavro.parse_schema(AVRO)
    payload = k_bytes[5:]

    def fastavro_write() -> bytes:
        out = io.BytesIO()
        fastavro.schemaless_writer(out, parsed, RECORD)
        return out.getvalue()

    best = bench({
        "kontrakt AvroSerializer": lambda: k_ser(RECORD, ctx),
        "confluent AvroSerializer": lambda: c_ser(RECORD, cctx),
        "fastavro schemaless_writer": fastavro_write,
        "kontrakt AvroDeserializer": lambda: k_de(k_bytes, ctx),
        "confluent AvroDeserializer": lambda: c_de(c_bytes, cctx),
        "fastavro schemaless_reader": lambda: fastavro.schemaless_reader(
            io.BytesIO(payload), parsed, None),
    }, args.rounds, args.ops)
    import kontrakt

    print(f"kontrakt from {os.path.dirname(kontrakt.__file__)}")
    for name, us in best.items():
        print(f"{name:28s} {us:6.2f} us/record")
    print(f"serialize:   confluent / kontrakt = "
          f"{best['confluent AvroSerializer'] / best['kontrakt AvroSerializer']:.2f}x")
    print(f"deserialize: confluent / kontrakt = "
          f"{best['confluent AvroDeserializer'] / best['kontrakt AvroDeserializer']:.2f}x")


if __name__ == "__main__":
    main()
