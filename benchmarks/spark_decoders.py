"""The Spark source's JSON and Protobuf column decoders in-process: row path against columnar.

No broker, no JVM: ``--records`` Confluent-framed payloads of an ``Order`` (id, customer,
qty, price, an array of tags, a nested address with an optional zip; Protobuf adds an enum
and a ``google.protobuf.Timestamp``) are decoded into one Arrow array of the column's type,
``--rounds`` times (best counts), by

* ``row path``: ``RowDecoder`` as the source decoded every batch before: the registry
  deserializer record by record (JSON validated against the writer schema), the mapping's
  converter, ``pa.array``;
* ``columnar``: the decoder ``column_decoder`` picks now (``decode_payloads``): Arrow's JSON
  reader for JSON, upb and compiled column fillers for Protobuf.

Both arrays are checked equal first. A Spark task adds the fetch and the metadata columns
(see ``benchmarks/spark.py`` for whole queries).

Run:  .venv/bin/python benchmarks/spark_decoders.py [--records 100000] [--rounds 3]
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from kontrakt.registry import MockSchemaRegistryClient, Schema
from kontrakt.serde import MessageField
from kontrakt.spark._columns import RowDecoder, column_decoder, row_decoder
from kontrakt.spark._fieldplan import FieldPlan, proto_file

JSON_SCHEMA = {"type": "object", "properties": {
    "id": {"type": "integer"}, "customer": {"type": "string"}, "qty": {"type": "integer"},
    "price": {"type": "number"}, "tags": {"type": "array", "items": {"type": "string"}},
    "addr": {"type": "object", "properties": {"city": {"type": "string"},
                                              "zip": {"type": ["string", "null"]}}}},
    "required": ["id"]}
PROTO = """syntax = "proto3";
package bench;
import "google/protobuf/timestamp.proto";
message Order {
  int64 id = 1; string customer = 2; int32 qty = 3; double price = 4;
  repeated string tags = 5; Addr addr = 6; Kind kind = 7; google.protobuf.Timestamp at = 8;
}
message Addr { string city = 1; optional string zip = 2; }
enum Kind { SHOP = 0; WEB = 1; }
"""


def json_docs(n: int, r: random.Random) -> list[bytes]:
    return [json.dumps({"id": i, "customer": f"c{r.randrange(1000)}", "qty": r.randrange(100),
                        "price": r.random() * 100, "tags": ["a", "b"][:r.randrange(3)],
                        "addr": {"city": "x", "zip": None if i % 2 else "z"}},
                       separators=(",", ":")).encode() for i in range(n)]


def proto_messages(n: int, r: random.Random) -> list[bytes]:
    from google.protobuf.message_factory import GetMessageClass

    cls = GetMessageClass(proto_file(PROTO, ()).message_types_by_name["Order"])
    out = []
    for i in range(n):
        m = cls(id=i, customer=f"c{r.randrange(1000)}", qty=r.randrange(100),
                price=r.random() * 100, tags=["a", "b"][:r.randrange(3)], kind=i % 2)
        m.addr.city = "x"
        if i % 2:
            m.addr.zip = "z"
        m.at.seconds = 1_700_000_000 + i
        out.append(m.SerializeToString())
    return out


def _best(run: Callable[[], Any], rounds: int) -> float:
    best = float("inf")
    for _ in range(rounds):
        t = time.perf_counter()
        run()
        best = min(best, time.perf_counter() - t)
    return best


def bench(client: Any, fmt: str, schema: Schema, bodies: list[bytes], rounds: int) -> None:
    sid = client.register_schema(f"bench-{fmt}", schema)
    plan = FieldPlan(fmt, client.get_latest_version(f"bench-{fmt}").schema)
    data_type = plan.spark_type()
    prefix = b"\0" + sid.to_bytes(4, "big") + (b"\0" if fmt == "protobuf" else b"")
    payloads = [prefix + b for b in bodies]
    rows = RowDecoder(row_decoder(FieldPlan(fmt, plan.schema, validate=True), client),
                      data_type)
    columns: Any = column_decoder(plan, client, data_type)
    want, errors = rows.decode_values(payloads, MessageField.VALUE)
    if errors or not columns.decode_payloads(payloads).equals(want):
        raise RuntimeError(f"{fmt}: the decoders disagree")
    n = len(payloads)
    for name, run in (("row path", lambda: rows.decode_values(payloads, MessageField.VALUE)),
                      ("columnar", lambda: columns.decode_payloads(payloads))):
        best = _best(run, rounds)
        print(f"{fmt:9s} {name:9s} {best / n * 1e6:7.2f} us a record "
              f"{n / best:12,.0f} records/s", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--records", type=int, default=100_000)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    r = random.Random(1)
    with MockSchemaRegistryClient({"url": "mock://"}) as client:
        bench(client, "json", Schema(json.dumps(JSON_SCHEMA), "JSON"),
              json_docs(args.records, r), args.rounds)
        bench(client, "protobuf", Schema(PROTO, "PROTOBUF"), proto_messages(args.records, r),
              args.rounds)


if __name__ == "__main__":
    main()
