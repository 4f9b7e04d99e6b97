"""Typed end to end: SerializingProducer -> broker -> DeserializingConsumer, kontrakt next to
confluent-kafka, Avro / JSON Schema / Protobuf, one Tansu broker and one embedded registry.

Each library, per format, produces N records of the 11-field ``Trade`` of
``benchmarks/serde.py`` to a fresh 4-partition topic with its ``SerializingProducer``
(``produce()``, confluent's idiom, ``poll(0)`` every 1000 records, then ``flush()``), then
reads them back with its ``DeserializingConsumer`` (assigned to every partition from the
beginning, ``poll()`` record by record, the one reading call confluent's has). Avro records
are dataclass instances on both sides (``to_dict`` / ``from_dict`` given alike), JSON records
dicts, Protobuf records generated messages. Both libraries talk to the same registry and
auto-register; confluent's serializers get the classic topic subject strategy (its 2.x
default first asks the registry for topic associations).

Reported: records/s for produce (until flushed), consume (until the last record is
deserialized) and end to end (N / both times), best of ``--rounds``, and kontrakt's ratio to
confluent-kafka.

Usage (from the repository root)::

    .venv/bin/python benchmarks/e2e.py [--records 50000] [--rounds 2] [--formats avro,json,protobuf]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import uuid
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.serde import AVRO, JSON, JSON_RECORD, RECORD, proto_trade
from kontrakt._types import TopicPartition
from kontrakt.clients import DeserializingConsumer, SerializingProducer
from kontrakt.registry import SchemaRegistryClient
from kontrakt.registry.server import RegistryServer
from kontrakt.serde import (
    AvroDeserializer,
    AvroSerializer,
    JSONDeserializer,
    JSONSerializer,
    ProtobufDeserializer,
    ProtobufSerializer,
)
from kontrakt.testing import TansuBroker

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    import confluent_kafka as ck
    from confluent_kafka.schema_registry import SchemaRegistryClient as CRegistry
    from confluent_kafka.schema_registry import avro as cavro
    from confluent_kafka.schema_registry import json_schema as cjson
    from confluent_kafka.schema_registry import protobuf as cproto
    from confluent_kafka.schema_registry import topic_subject_name_strategy as c_topic

PARTITIONS = 4


@dataclass
class Trade:
    id: int
    venue: int
    price: float
    size: float
    buy: bool
    symbol: str
    raw: bytes
    note: str | None
    side: str
    tags: list[str]
    attrs: dict[str, int]


def to_dict(obj: Trade, ctx: Any) -> dict[str, Any]:
    return dict(vars(obj))


def from_dict(d: dict[str, Any], ctx: Any) -> Trade:
    return Trade(**d)


@dataclass
class Case:
    """One format: the records, and each library's (serializer, deserializer) makers."""

    records: list[Any]
    ours: Callable[[SchemaRegistryClient], tuple[Any, Any]]
    theirs: Callable[[Any], tuple[Any, Any]]


def cases(n: int) -> dict[str, Case]:
    cs = {"subject.name.strategy": c_topic}
    avro = json.dumps(AVRO)
    schema = json.dumps(JSON)
    trade_pb = proto_trade()
    msg = trade_pb(id=1234567890123, venue=42, price=101.25, size=3.5, buy=True,
                   symbol="KONTRAKT", raw=b"\x00\x01\x02\x03", note="first fill", side=1,
                   tags=["a", "bb"], attrs={"lot": 7, "seq": 99})
    return {
        "avro": Case(
            [Trade(**{**RECORD, "id": i}) for i in range(n)],
            lambda reg: (AvroSerializer(reg, avro, to_dict=to_dict),
                         AvroDeserializer(reg, from_dict=from_dict)),
            lambda reg: (cavro.AvroSerializer(reg, avro, to_dict=to_dict, conf=cs),
                         cavro.AvroDeserializer(reg, from_dict=from_dict, conf=cs))),
        "json": Case(
            [{**JSON_RECORD, "id": i} for i in range(n)],
            lambda reg: (JSONSerializer(schema, reg), JSONDeserializer(schema)),
            lambda reg: (cjson.JSONSerializer(schema, reg, conf=cs),
                         cjson.JSONDeserializer(schema, conf=cs))),
        "protobuf": Case(
            [trade_pb(id=i, venue=msg.venue, price=msg.price, size=msg.size, buy=msg.buy,
                      symbol=msg.symbol, raw=msg.raw, note=msg.note, side=msg.side,
                      tags=msg.tags, attrs=msg.attrs) for i in range(n)],
            lambda reg: (ProtobufSerializer(trade_pb, reg), ProtobufDeserializer(trade_pb)),
            lambda reg: (cproto.ProtobufSerializer(trade_pb, reg, {
                "use.deprecated.format": False, **cs}),
                cproto.ProtobufDeserializer(trade_pb, {"use.deprecated.format": False, **cs}))),
    }


def run_ours(bs: str, url: str, topic: str, case: Case) -> tuple[float, float]:
    n = len(case.records)
    with SchemaRegistryClient({"url": url}) as reg:
        ser, de = case.ours(reg)
        with SerializingProducer({"bootstrap.servers": bs, "linger.ms": 5,
                                  "value.serializer": ser}) as p:
            t0 = time.perf_counter()
            for i, rec in enumerate(case.records):
                p.produce(topic, value=rec)
                if not i % 1000:
                    p.poll(0)
            p.flush()
            produced = time.perf_counter() - t0
        with DeserializingConsumer({"bootstrap.servers": bs, "value.deserializer": de,
                                    "auto.offset.reset": "earliest",
                                    "enable.auto.commit": False}) as c:
            c.assign([TopicPartition(topic, part) for part in range(PARTITIONS)])
            got = 0
            t0 = time.perf_counter()
            deadline = time.monotonic() + 300
            while got < n and time.monotonic() < deadline:
                if c.poll(1.0) is not None:
                    got += 1
            consumed = time.perf_counter() - t0
    assert got == n, (got, n)
    return produced, consumed


def run_theirs(bs: str, url: str, topic: str, case: Case) -> tuple[float, float]:
    from confluent_kafka import DeserializingConsumer as CDeserializingConsumer
    from confluent_kafka import SerializingProducer as CSerializingProducer

    n = len(case.records)
    reg = CRegistry({"url": url})
    ser, de = case.theirs(reg)
    p = CSerializingProducer({"bootstrap.servers": bs, "linger.ms": 5,
                              "queue.buffering.max.messages": 2 * n + 10,
                              "value.serializer": ser})
    t0 = time.perf_counter()
    for i, rec in enumerate(case.records):
        p.produce(topic, value=rec)
        if not i % 1000:
            p.poll(0)
    p.flush()
    produced = time.perf_counter() - t0
    c = CDeserializingConsumer({"bootstrap.servers": bs, "group.id": f"g-{topic}",
                                "enable.auto.commit": False,
                                "auto.offset.reset": "earliest", "value.deserializer": de})
    c.assign([ck.TopicPartition(topic, part, ck.OFFSET_BEGINNING)
              for part in range(PARTITIONS)])
    got = 0
    t0 = time.perf_counter()
    deadline = time.monotonic() + 300
    while got < n and time.monotonic() < deadline:
        msg = c.poll(1.0)
        if msg is not None and msg.error() is None:
            got += 1
    consumed = time.perf_counter() - t0
    c.close()
    assert got == n, (got, n)
    return produced, consumed


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--records", type=int, default=50_000)
    ap.add_argument("--rounds", type=int, default=2, help="best of this many runs")
    ap.add_argument("--formats", default="avro,json,protobuf")
    args = ap.parse_args()
    all_cases = cases(args.records)
    formats = args.formats.split(",")
    best: dict[tuple[str, str], tuple[float, float, float]] = {}
    with TansuBroker() as broker, RegistryServer() as registry:
        bs = broker.bootstrap_servers
        for rnd in range(args.rounds):
            for fmt in formats:
                for lib, runner in (("kontrakt", run_ours), ("confluent-kafka", run_theirs)):
                    topic = f"e2e-{fmt}-{uuid.uuid4().hex[:8]}"
                    broker.create_topic(topic, PARTITIONS)
                    produced, consumed = runner(bs, registry.url, topic, all_cases[fmt])
                    n = args.records
                    rates = (n / produced, n / consumed, n / (produced + consumed))
                    old = best.get((fmt, lib))
                    if old is None or rates[2] > old[2]:
                        best[(fmt, lib)] = rates
                    print(f"round {rnd + 1} {fmt:8s} {lib:15s} produce {rates[0]:>9,.0f} "
                          f"consume {rates[1]:>9,.0f} end-to-end {rates[2]:>9,.0f} rec/s",
                          flush=True)
    print(f"\nbest of {args.rounds} ({args.records} records), records/s; "
          "ratio = kontrakt / confluent-kafka")
    print(f"{'format':8s} {'step':11s} {'kontrakt':>10s} {'confluent':>10s} {'ratio':>6s}")
    for fmt in formats:
        ours, theirs = best[(fmt, "kontrakt")], best[(fmt, "confluent-kafka")]
        for i, step in enumerate(("produce", "consume", "end to end")):
            print(f"{fmt:8s} {step:11s} {ours[i]:>10,.0f} {theirs[i]:>10,.0f} "
                  f"{ours[i] / theirs[i]:5.2f}x")


if __name__ == "__main__":
    main()
