"""Serde throughput: kontrakt's serializers next to confluent-kafka's and the raw codecs.

One 11-field record per format, all registry lookups warmed up first (both libraries cache
them), one core, interleaved rounds, best round reported. Run from the repository root:

    /work/venv/bin/python benchmarks/serde.py [--rounds 20] [--ops 3000]
"""

from __future__ import annotations

import argparse
import io
import json
import os
import sys
import tempfile
import time
import warnings
from collections.abc import Callable
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import fastavro
import jsonschema

from kontrakt.registry import MockSchemaRegistryClient
from kontrakt.serde import (
    AvroDeserializer,
    AvroSerializer,
    JSONDeserializer,
    JSONSerializer,
    MessageField,
    ProtobufDeserializer,
    ProtobufSerializer,
    SerializationContext,
)
from kontrakt.serde._jsonvalidate import compile_validator
from tests.unit.serde._support import FakeRegistry

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from confluent_kafka.schema_registry import avro as cavro
    from confluent_kafka.schema_registry import json_schema as cjson
    from confluent_kafka.schema_registry import protobuf as cproto
    from confluent_kafka.schema_registry._sync.mock_schema_registry_client import (
        MockSchemaRegistryClient as ConfluentMock,
    )
    from confluent_kafka.serialization import MessageField as CField
    from confluent_kafka.serialization import SerializationContext as CContext

AVRO = {
    "type": "record", "name": "Trade", "namespace": "bench",
    "fields": [
        {"name": "id", "type": "long"}, {"name": "venue", "type": "int"},
        {"name": "price", "type": "double"}, {"name": "size", "type": "float"},
        {"name": "buy", "type": "boolean"}, {"name": "symbol", "type": "string"},
        {"name": "raw", "type": "bytes"},
        {"name": "note", "type": ["null", "string"], "default": None},
        {"name": "side", "type": {"type": "enum", "name": "Side", "symbols": ["BID", "ASK"]}},
        {"name": "tags", "type": {"type": "array", "items": "string"}},
        {"name": "attrs", "type": {"type": "map", "values": "long"}},
    ],
}
RECORD = {"id": 1234567890123, "venue": 42, "price": 101.25, "size": 3.5, "buy": True,
          "symbol": "KONTRAKT", "raw": b"\x00\x01\x02\x03", "note": "first fill",
          "side": "ASK", "tags": ["a", "bb"], "attrs": {"lot": 7, "seq": 99}}
JSON = {
    "$schema": "http://json-schema.org/draft-07/schema#", "title": "Trade", "type": "object",
    "properties": {
        "id": {"type": "integer"}, "venue": {"type": "integer", "minimum": 0},
        "price": {"type": "number"}, "size": {"type": "number"}, "buy": {"type": "boolean"},
        "symbol": {"type": "string", "maxLength": 12}, "raw": {"type": "string"},
        "note": {"type": ["string", "null"]}, "side": {"enum": ["BID", "ASK"]},
        "tags": {"type": "array", "items": {"type": "string"}},
        "attrs": {"type": "object", "additionalProperties": {"type": "integer"}},
    },
    "required": ["id", "price", "symbol", "side"],
}
JSON_RECORD = {**RECORD, "raw": "AAECAw=="}
PROTO = """syntax = "proto3";
package bench;
message Trade {
  int64 id = 1; int32 venue = 2; double price = 3; float size = 4; bool buy = 5;
  string symbol = 6; bytes raw = 7; optional string note = 8;
  enum Side { BID = 0; ASK = 1; }
  Side side = 9; repeated string tags = 10; map<string, int64> attrs = 11;
}
"""


def proto_trade() -> Any:
    from grpc_tools import protoc

    out = tempfile.mkdtemp(prefix="kontrakt-bench-")
    with open(os.path.join(out, "bench_trade.proto"), "w") as f:
        f.write(PROTO)
    include = os.path.join(os.path.dirname(protoc.__file__), "_proto")
    assert protoc.main(["protoc", f"-I{out}", f"-I{include}", f"--python_out={out}",
                        "bench_trade.proto"]) == 0
    sys.path.insert(0, out)
    import bench_trade_pb2  # type: ignore[import-not-found]

    return bench_trade_pb2.Trade


def bench(cases: dict[str, Callable[[], Any]], rounds: int, ops: int) -> dict[str, float]:
    """Best-of-``rounds`` microseconds per op, cases interleaved round by round."""
    best = {name: float("inf") for name in cases}
    for _ in range(rounds):
        for name, fn in cases.items():
            t0 = time.perf_counter()
            for _ in range(ops):
                fn()
            best[name] = min(best[name], (time.perf_counter() - t0) / ops * 1e6)
    return best


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--ops", type=int, default=3000)
    args = parser.parse_args()

    # confluent gets its classic topic strategy explicitly: its 2.x default first asks the
    # registry for topic associations, which would only slow it down here.
    from confluent_kafka.schema_registry import topic_subject_name_strategy as c_topic

    cs = {"subject.name.strategy": c_topic}
    ctx = SerializationContext("trades", MessageField.VALUE)
    cctx = CContext("trades", CField.VALUE)
    ours_reg = MockSchemaRegistryClient({"url": "mock://bench"})
    theirs_reg = ConfluentMock({"url": "mock://bench"})

    # ---- Avro
    parsed = fastavro.parse_schema(AVRO)
    k_ser, k_de = AvroSerializer(ours_reg, json.dumps(AVRO)), AvroDeserializer(ours_reg)
    c_ser, c_de = (cavro.AvroSerializer(theirs_reg, json.dumps(AVRO), conf=cs),
                    cavro.AvroDeserializer(theirs_reg, conf=cs))
    k_bytes, c_bytes = k_ser(RECORD, ctx), c_ser(RECORD, cctx)
    raw = k_bytes[5:]
    assert k_de(k_bytes, ctx) == c_de(c_bytes, cctx) == RECORD

    def raw_write() -> bytes:
        out = io.BytesIO()
        fastavro.schemaless_writer(out, parsed, RECORD)
        return out.getvalue()

    rows = []
    avro = bench({
        "raw ser": raw_write,
        "k ser": lambda: k_ser(RECORD, ctx),
        "c ser": lambda: c_ser(RECORD, cctx),
        "raw de": lambda: fastavro.schemaless_reader(io.BytesIO(raw), parsed, None),
        "k de": lambda: k_de(k_bytes, ctx),
        "c de": lambda: c_de(c_bytes, cctx),
    }, args.rounds, args.ops)
    rows.append(("Avro serialize", avro["raw ser"], avro["k ser"], avro["c ser"]))
    rows.append(("Avro deserialize", avro["raw de"], avro["k de"], avro["c de"]))

    # ---- Protobuf
    Trade = proto_trade()
    msg = Trade(id=1234567890123, venue=42, price=101.25, size=3.5, buy=True, symbol="KONTRAKT",
                raw=b"\x00\x01\x02\x03", note="first fill", side=1, tags=["a", "bb"],
                attrs={"lot": 7, "seq": 99})
    fake = FakeRegistry()
    kp_ser, kp_de = ProtobufSerializer(Trade, fake), ProtobufDeserializer(Trade)
    cp_ser = cproto.ProtobufSerializer(Trade, fake, {"use.deprecated.format": False, **cs})
    cp_de = cproto.ProtobufDeserializer(Trade, {"use.deprecated.format": False, **cs})
    kp_bytes, cp_bytes = kp_ser(msg, ctx), cp_ser(msg, cctx)
    assert kp_bytes == cp_bytes and kp_de(kp_bytes, ctx) == msg
    praw = msg.SerializeToString()
    proto = bench({
        "raw ser": lambda: msg.SerializeToString(),
        "k ser": lambda: kp_ser(msg, ctx),
        "c ser": lambda: cp_ser(msg, cctx),
        "raw de": lambda: Trade.FromString(praw),
        "k de": lambda: kp_de(kp_bytes, ctx),
        "c de": lambda: cp_de(cp_bytes, cctx),
    }, args.rounds, args.ops)
    rows.append(("Protobuf serialize", proto["raw ser"], proto["k ser"], proto["c ser"]))
    rows.append(("Protobuf deserialize", proto["raw de"], proto["k de"], proto["c de"]))

    # ---- JSON with validation
    js = json.dumps(JSON)
    ctx = SerializationContext("trades-json", MessageField.VALUE)
    cctx = CContext("trades-json", CField.VALUE)
    kj_ser = JSONSerializer(js, ours_reg)
    kj_de = JSONDeserializer(None, schema_registry_client=ours_reg)
    cj_ser = cjson.JSONSerializer(js, theirs_reg, conf=cs)
    cj_de = cjson.JSONDeserializer(None, schema_registry_client=theirs_reg, conf=cs)
    kj_bytes, cj_bytes = kj_ser(JSON_RECORD, ctx), cj_ser(JSON_RECORD, cctx)
    assert kj_bytes[5:] == cj_bytes[5:] and kj_de(kj_bytes, ctx) == JSON_RECORD
    assert cj_de(cj_bytes, cctx) == JSON_RECORD
    compiled = compile_validator(JSON)
    assert compiled is not None
    general = jsonschema.Draft7Validator(JSON)
    dumps = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False).encode
    ops = max(args.ops // 4, 1000)
    jsn = bench({
        "raw ser": lambda: dumps(JSON_RECORD).encode(),
        "k ser": lambda: kj_ser(JSON_RECORD, ctx),
        "c ser": lambda: cj_ser(JSON_RECORD, cctx),
        "raw de": lambda: json.loads(kj_bytes[5:]),
        "k de": lambda: kj_de(kj_bytes, ctx),
        "c de": lambda: cj_de(cj_bytes, cctx),
        "compiled validate": lambda: compiled(JSON_RECORD),
        "jsonschema validate": lambda: general.validate(JSON_RECORD),
    }, args.rounds, ops)
    rows.append(("JSON serialize + validate", jsn["raw ser"], jsn["k ser"], jsn["c ser"]))
    rows.append(("JSON deserialize + validate", jsn["raw de"], jsn["k de"], jsn["c de"]))

    print(f"{'operation':30} {'raw codec':>10} {'kontrakt':>10} {'confluent':>10} "
          f"{'k/raw':>7} {'c/k':>7}")
    for name, r, k, c in rows:
        print(f"{name:30} {r:9.2f}µ {k:9.2f}µ {c:9.2f}µ {k / r:6.2f}x {c / k:6.2f}x")
    print(f"validator only: compiled {jsn['compiled validate']:.2f}µ, "
          f"jsonschema {jsn['jsonschema validate']:.2f}µ "
          f"({jsn['jsonschema validate'] / jsn['compiled validate']:.1f}x)")
    print("(raw JSON = json encode/decode without validation or framing)")


if __name__ == "__main__":
    main()
