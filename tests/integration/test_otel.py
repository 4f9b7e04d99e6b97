"""OpenTelemetry instrumentation (kontrakt.otel) on Tansu, read back through the SDK's
in-memory span exporter and metric reader: spans with the messaging conventions, the trace
context carried in record headers from producer to consumer, and counts after known traffic.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("opentelemetry.sdk", reason="needs the otel test dependencies")
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import (
    InMemorySpanExporter,
)
from opentelemetry.trace import SpanKind, StatusCode

from kontrakt._types import TopicPartition
from kontrakt.clients import SerializingProducer
from kontrakt.clients.consumer import AsyncConsumer, Consumer
from kontrakt.clients.producer import AsyncProducer, Producer
from kontrakt.errors import RecordTooLargeError
from kontrakt.otel import instrument_consumer, instrument_producer
from kontrakt.testing import TansuBroker


class Telemetry:
    def __init__(self) -> None:
        self.spans = InMemorySpanExporter()
        self.tracer_provider = TracerProvider()
        self.tracer_provider.add_span_processor(SimpleSpanProcessor(self.spans))
        self.reader = InMemoryMetricReader()
        self.meter_provider = MeterProvider(metric_readers=[self.reader])

    @property
    def providers(self) -> dict[str, Any]:
        return {"tracer_provider": self.tracer_provider, "meter_provider": self.meter_provider}

    def metric(self, name: str) -> dict[str, float]:
        """A metric's value per destination (sum for counters, count for histograms)."""
        out: dict[str, float] = {}
        data = self.reader.get_metrics_data()
        for rm in data.resource_metrics if data else ():
            for sm in rm.scope_metrics:
                for m in sm.metrics:
                    if m.name != name:
                        continue
                    for point in m.data.data_points:
                        topic = str(point.attributes.get("messaging.destination.name"))
                        out[topic] = out.get(topic, 0) + getattr(point, "value", None) \
                            if hasattr(point, "value") else out.get(topic, 0) + point.count
        return out


@pytest.fixture
def telemetry() -> Iterator[Telemetry]:
    t = Telemetry()
    yield t
    t.tracer_provider.shutdown()
    t.meter_provider.shutdown()


def test_sync_spans_and_context_propagation(tansu_broker: TansuBroker, topic_name: str,
                                            telemetry: Telemetry) -> None:
    tansu_broker.create_topic(topic_name, 1)
    bs = tansu_broker.bootstrap_servers
    tracer = telemetry.tracer_provider.get_tracer("test")
    with instrument_producer(Producer(bootstrap_servers=bs, client_id="app-1"),
                             **telemetry.providers) as p:
        with tracer.start_as_current_span("checkout") as parent:
            metas = [p.send(topic_name, b"v%d" % i, b"order-%d" % i,
                            headers=[("h", b"1")]).result(30) for i in range(3)]
        p.send_and_wait(topic_name, b"direct", timeout=30)
        delivered: list[Any] = []
        p.produce(topic_name, b"confluent-style", on_delivery=lambda e, m: delivered.append(e))
        p.flush(30)
    assert delivered == [None]
    sends = [s for s in telemetry.spans.get_finished_spans() if s.kind is SpanKind.PRODUCER]
    assert [s.name for s in sends] == [f"send {topic_name}"] * 5
    first = sends[0]
    assert first.parent is not None and first.parent.span_id == parent.get_span_context().span_id
    assert first.attributes["messaging.system"] == "kafka"
    assert first.attributes["messaging.destination.name"] == topic_name
    assert first.attributes["messaging.kafka.message.key"] == "order-0"
    assert first.attributes["messaging.kafka.offset"] == metas[0].offset
    assert first.attributes["messaging.client.id"] == "app-1"

    with instrument_consumer(Consumer(bootstrap_servers=bs, group_id="g-otel",
                                      auto_offset_reset="earliest", enable_auto_commit=False),
                             **telemetry.providers) as c:
        c.assign([TopicPartition(topic_name, 0)])
        records = []
        for _ in range(200):
            record = c.poll(0.5)
            if record is not None:
                records.append(record)
                # Work done while handling the record is traced beneath its process span.
                with tracer.start_as_current_span("handle"):
                    pass
            if len(records) == 5:
                break
        c.poll(0.1)  # ends the last record's process span
    assert [r.value for r in records][:3] == [b"v0", b"v1", b"v2"]
    assert dict(records[0].headers)["h"] == b"1" and "traceparent" in dict(records[0].headers)
    spans = telemetry.spans.get_finished_spans()
    processes = [s for s in spans if s.kind is SpanKind.CONSUMER]
    assert len(processes) == 5
    by_id = {s.context.span_id: s for s in sends}
    for proc, send in zip(processes, sends, strict=True):
        # Each record's process span is a child of the span that sent it.
        assert proc.parent is not None and by_id[proc.parent.span_id] is send
        assert proc.context.trace_id == send.context.trace_id
        assert proc.attributes["messaging.consumer.group.name"] == "g-otel"
        assert proc.attributes["messaging.operation.type"] == "process"
    handles = [s for s in spans if s.name == "handle"]
    assert [h.parent.span_id for h in handles if h.parent] == [
        p.context.span_id for p in processes]
    assert telemetry.metric("messaging.client.sent.messages") == {topic_name: 5}
    assert telemetry.metric("messaging.client.consumed.messages") == {topic_name: 5}
    assert telemetry.metric("messaging.client.operation.duration") == {topic_name: 5}


def test_async_clients_and_failures(tansu_broker: TansuBroker, topic_name: str,
                                    telemetry: Telemetry) -> None:
    tansu_broker.create_topic(topic_name, 2)
    bs = tansu_broker.bootstrap_servers

    async def run() -> list[Any]:
        async with instrument_producer(AsyncProducer(bootstrap_servers=bs,
                                                     message_max_bytes=10_000),
                                       **telemetry.providers) as p:
            futs = [await p.send(topic_name, b"a%d" % i, partition=i % 2) for i in range(4)]
            await asyncio.gather(*futs)
            with pytest.raises(RecordTooLargeError):
                await p.send(topic_name, b"x" * 20_000)
        async with instrument_consumer(AsyncConsumer(bootstrap_servers=bs,
                                                     auto_offset_reset="earliest"),
                                       **telemetry.providers) as c:
            c.assign([TopicPartition(topic_name, 0), TopicPartition(topic_name, 1)])
            got: list[Any] = []
            for _ in range(100):
                batch = await c.getmany(0.5)
                got.extend(r for rs in batch.values() for r in rs)
                if len(got) >= 4:
                    break
            return got

    got = asyncio.run(run())
    assert len(got) == 4
    spans = telemetry.spans.get_finished_spans()
    sends = [s for s in spans if s.kind is SpanKind.PRODUCER]
    assert len(sends) == 5
    failed = [s for s in sends if s.status.status_code is StatusCode.ERROR]
    assert len(failed) == 1 and failed[0].events[0].name == "exception"
    receives = [s for s in spans if s.kind is SpanKind.CONSUMER]
    assert receives and all(s.name == f"receive {topic_name}" for s in receives)
    linked = {link.context.span_id for s in receives for link in s.links}
    assert linked == {s.context.span_id for s in sends if s not in failed}
    assert sum(s.attributes["messaging.batch.message_count"] for s in receives) == 4


def test_serializing_producer_keeps_its_argument_order(tansu_broker: TansuBroker,
                                                       topic_name: str,
                                                       telemetry: Telemetry) -> None:
    """confluent-kafka's SerializingProducer.produce takes the key before the value."""
    tansu_broker.create_topic(topic_name, 1)
    with instrument_producer(SerializingProducer(
            bootstrap_servers=tansu_broker.bootstrap_servers,
            key_serializer=lambda k, ctx: k.encode(), value_serializer=lambda v, ctx: v.encode()),
            **telemetry.providers) as p:
        p.produce(topic_name, "the-key", "the-value")
        p.flush(30)
    (span,) = telemetry.spans.get_finished_spans()
    assert span.attributes["messaging.kafka.message.key"] == "the-key"
    assert span.status.status_code is StatusCode.UNSET
