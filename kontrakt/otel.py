"""OpenTelemetry instrumentation for Kontrakt's producers and consumers (``kontrakt[otel]``).

Wrap a client and use the wrapper as the client itself::

    from kontrakt.otel import instrument_consumer, instrument_producer

    producer = instrument_producer(Producer(bootstrap_servers="..."))
    producer.send("orders", b"...")            # a PRODUCER span, trace context in headers

    consumer = instrument_consumer(Consumer(bootstrap_servers="...", group_id="g"))
    record = consumer.poll(1.0)                # a CONSUMER "process" span, child of the
                                               # producer's span, current until next poll

Spans follow OpenTelemetry's messaging semantic conventions for Kafka (``messaging.system``
``kafka``, ``messaging.destination.name``, ``messaging.destination.partition.id``,
``messaging.kafka.offset``, ``messaging.kafka.message.key``, ``messaging.consumer.group.name``,
``messaging.operation.type`` ``send`` / ``process`` / ``receive``). The trace context travels
in record headers through the globally configured propagator (W3C ``traceparent`` by
default), so Kontrakt interoperates with every instrumented Kafka client.

Per record, and only on the wrapped client:

* ``send`` / ``send_and_wait`` / ``produce``: a ``send <topic>`` span from the call until the
  broker's acknowledgement (its partition and offset are added then; a failure records the
  exception and sets the status to ERROR).
* ``poll``: a ``process <topic>`` span parented by the context in the record's headers,
  made current until the next ``poll`` (or ``close``), so that work done for the record is
  traced beneath it.
* ``getmany`` / ``consume``: one ``receive`` span linking the records' contexts (up to
  :data:`MAX_LINKS`).

Metrics through the OpenTelemetry metrics API: ``messaging.client.sent.messages`` and
``messaging.client.consumed.messages`` (counters), ``messaging.client.operation.duration``
(histogram, seconds, send to acknowledgement).

The wrappers add no cost to unwrapped clients. Methods they do not instrument are the
client's own (reached through attribute access).
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import Any

try:
    from opentelemetry import context as otel_context
    from opentelemetry import metrics, propagate, trace
    from opentelemetry.propagators.textmap import Getter, Setter
    from opentelemetry.trace import Link, SpanKind, Status, StatusCode
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    from kontrakt.errors import MissingExtraError

    raise MissingExtraError("kontrakt.otel needs OpenTelemetry: pip install 'kontrakt[otel]'",
                            name="opentelemetry", extra="otel") from exc

from kontrakt import __version__
from kontrakt._types import ConsumerRecord, RecordMetadata, header_list

__all__ = ["MAX_LINKS", "instrument_consumer", "instrument_producer"]

#: The most records one ``receive`` span links to.
MAX_LINKS = 128
_SCOPE = "kontrakt"


class _HeaderSetter(Setter[list[tuple[str, bytes | None]]]):
    def set(self, carrier: list[tuple[str, bytes | None]], key: str, value: str) -> None:
        # A context already in the headers (a re-send) is replaced, not duplicated.
        carrier[:] = [(k, v) for k, v in carrier if k != key]
        carrier.append((key, value.encode()))


class _HeaderGetter(Getter[list[tuple[str, bytes | None]]]):
    def get(self, carrier: list[tuple[str, bytes | None]], key: str) -> list[str] | None:
        found = [v.decode(errors="replace") for k, v in carrier if k == key and v is not None]
        return found or None

    def keys(self, carrier: list[tuple[str, bytes | None]]) -> list[str]:
        return [k for k, _ in carrier]


_SETTER = _HeaderSetter()
_GETTER = _HeaderGetter()




def _key_attribute(key: Any) -> str | None:
    if isinstance(key, bytes):
        try:
            return key.decode()
        except UnicodeDecodeError:
            return None
    return key if isinstance(key, str) else None


class _Telemetry:
    """The tracer and instruments one wrapper uses."""

    def __init__(self, tracer_provider: Any, meter_provider: Any, client_id: str | None,
                 group: str | None) -> None:
        self.tracer = trace.get_tracer(_SCOPE, __version__, tracer_provider)
        meter = metrics.get_meter(_SCOPE, __version__, meter_provider)
        self.sent = meter.create_counter(
            "messaging.client.sent.messages", unit="{message}",
            description="Records the client sent (acknowledged or failed).")
        self.consumed = meter.create_counter(
            "messaging.client.consumed.messages", unit="{message}",
            description="Records the client handed to the application.")
        self.duration = meter.create_histogram(
            "messaging.client.operation.duration", unit="s",
            description="Time from send to the broker's acknowledgement.")
        self.base: dict[str, Any] = {"messaging.system": "kafka"}
        if client_id:
            self.base["messaging.client.id"] = client_id
        if group:
            self.base["messaging.consumer.group.name"] = group

    # ----------------------------------------------------------------- producer side
    def start_send(self, topic: str, key: Any, partition: int | None, headers: Any
                   ) -> tuple[Any, list[tuple[str, bytes | None]], float]:
        attributes = {**self.base, "messaging.operation.type": "send",
                      "messaging.operation.name": "send", "messaging.destination.name": topic}
        if partition is not None and partition >= 0:
            attributes["messaging.destination.partition.id"] = str(partition)
        key_text = _key_attribute(key)
        if key_text is not None:
            attributes["messaging.kafka.message.key"] = key_text
        span = self.tracer.start_span(f"send {topic}", kind=SpanKind.PRODUCER,
                                      attributes=attributes)
        carrier = header_list(headers)
        propagate.inject(carrier, context=trace.set_span_in_context(span), setter=_SETTER)
        return span, carrier, time.perf_counter()

    def end_send(self, span: Any, started: float, topic: str,
                 metadata: RecordMetadata | None, error: BaseException | None) -> None:
        attributes = {**self.base, "messaging.operation.name": "send",
                      "messaging.destination.name": topic}
        if error is not None:
            span.record_exception(error)
            span.set_status(Status(StatusCode.ERROR, str(error)))
            attributes["error.type"] = type(error).__name__
        elif metadata is not None:
            span.set_attribute("messaging.destination.partition.id", str(metadata.partition))
            if metadata.offset >= 0:
                span.set_attribute("messaging.kafka.offset", metadata.offset)
        span.end()
        self.sent.add(1, attributes)
        self.duration.record(time.perf_counter() - started, attributes)

    def on_future(self, fut: Any, span: Any, started: float, topic: str) -> None:
        def done(f: Any) -> None:
            try:
                error = f.exception()
            except BaseException as exc:  # cancelled: the wait stopped, not the record
                error = exc
            self.end_send(span, started, topic, None if error is not None else f.result(),
                          error)

        fut.add_done_callback(done)

    # ----------------------------------------------------------------- consumer side
    def process_span(self, record: ConsumerRecord[Any, Any]) -> Any:
        parent = propagate.extract(record.headers or [], getter=_GETTER)
        attributes = {**self.base, "messaging.operation.type": "process",
                      "messaging.operation.name": "process",
                      "messaging.destination.name": record.topic,
                      "messaging.destination.partition.id": str(record.partition),
                      "messaging.kafka.offset": record.offset}
        key_text = _key_attribute(record.key)
        if key_text is not None:
            attributes["messaging.kafka.message.key"] = key_text
        self.consumed.add(1, {**self.base, "messaging.destination.name": record.topic})
        return self.tracer.start_span(f"process {record.topic}", context=parent,
                                      kind=SpanKind.CONSUMER, attributes=attributes)

    def receive_span(self, records: Iterable[ConsumerRecord[Any, Any]]) -> None:
        records = list(records)
        if not records:
            return
        topics = {r.topic for r in records}
        links = []
        for r in records[:MAX_LINKS]:
            ctx = trace.get_current_span(propagate.extract(r.headers or [], getter=_GETTER))
            span_context = ctx.get_span_context()
            if span_context.is_valid:
                links.append(Link(span_context))
        topic = next(iter(topics)) if len(topics) == 1 else None
        attributes = {**self.base, "messaging.operation.type": "receive",
                      "messaging.operation.name": "receive",
                      "messaging.batch.message_count": len(records)}
        if topic is not None:
            attributes["messaging.destination.name"] = topic
        span = self.tracer.start_span(f"receive {topic}" if topic else "receive",
                                      kind=SpanKind.CONSUMER, attributes=attributes,
                                      links=links)
        span.end()
        for t in topics:
            self.consumed.add(sum(1 for r in records if r.topic == t),
                              {**self.base, "messaging.destination.name": t})


def _config_value(client: Any, key: str) -> str | None:
    config = getattr(client, "config", None)
    try:
        value = config.get(key) if config is not None else None
    except Exception:  # a config object without .get: nothing to report
        return None
    return str(value) if value else None


class _Wrapper:
    """Delegates every attribute it does not instrument to the wrapped client."""

    def __init__(self, client: Any, telemetry: _Telemetry) -> None:
        self._client = client
        self._telemetry = telemetry

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)

    def __enter__(self) -> Any:
        self._client.__enter__()
        return self

    def __exit__(self, *exc: Any) -> Any:
        return self._client.__exit__(*exc)

    async def __aenter__(self) -> Any:
        await self._client.__aenter__()
        return self

    async def __aexit__(self, *exc: Any) -> Any:
        return await self._client.__aexit__(*exc)

    @property
    def wrapped(self) -> Any:
        """The instrumented client."""
        return self._client


class TracedProducer(_Wrapper):
    """A sync :class:`~kontrakt.clients.producer.Producer` that traces what it sends."""

    def send(self, topic: str, value: Any = None, key: Any = None, *,
             partition: int | None = None, timestamp_ms: int | None = None,
             headers: Any = None) -> Any:
        t = self._telemetry
        span, carrier, started = t.start_send(topic, key, partition, headers)
        try:
            fut = self._client.send(topic, value, key, partition=partition,
                                    timestamp_ms=timestamp_ms, headers=carrier)
        except BaseException as exc:
            t.end_send(span, started, topic, None, exc)
            raise
        t.on_future(fut, span, started, topic)
        return fut

    def send_and_wait(self, topic: str, value: Any = None, key: Any = None, *,
                      partition: int | None = None, timestamp_ms: int | None = None,
                      headers: Any = None, timeout: float | None = None) -> Any:
        t = self._telemetry
        span, carrier, started = t.start_send(topic, key, partition, headers)
        try:
            md = self._client.send_and_wait(topic, value, key, partition=partition,
                                            timestamp_ms=timestamp_ms, headers=carrier,
                                            timeout=timeout)
        except BaseException as exc:
            t.end_send(span, started, topic, None, exc)
            raise
        t.end_send(span, started, topic, md, None)
        return md

    def produce(self, *args: Any, **kwargs: Any) -> None:
        """The wrapped client's ``produce`` (its own argument order: a
        SerializingProducer takes the key before the value, as confluent-kafka's)."""
        import inspect

        bound = inspect.signature(self._client.produce).bind(*args, **kwargs)
        bound.apply_defaults()
        call = bound.arguments
        topic = call["topic"]
        t = self._telemetry
        span, carrier, started = t.start_send(topic, call.get("key"), call.get("partition"),
                                              call.get("headers"))
        user = call.get("on_delivery") or call.get("callback")

        def delivered(err: Any, md: Any) -> None:
            t.end_send(span, started, topic, md if err is None else None, err)
            if user is not None:
                user(err, md)

        call["headers"] = carrier
        call["on_delivery"] = delivered
        if "callback" in call:
            call["callback"] = None
        try:
            self._client.produce(*bound.args, **bound.kwargs)
        except BaseException as exc:
            t.end_send(span, started, topic, None, exc)
            raise


class AsyncTracedProducer(_Wrapper):
    """An :class:`~kontrakt.clients.producer.AsyncProducer` that traces what it sends."""

    async def send(self, topic: str, value: Any = None, key: Any = None, *,
                   partition: int | None = None, timestamp_ms: int | None = None,
                   headers: Any = None) -> Any:
        t = self._telemetry
        span, carrier, started = t.start_send(topic, key, partition, headers)
        try:
            fut = await self._client.send(topic, value, key, partition=partition,
                                          timestamp_ms=timestamp_ms, headers=carrier)
        except BaseException as exc:
            t.end_send(span, started, topic, None, exc)
            raise
        t.on_future(fut, span, started, topic)
        return fut

    async def send_and_wait(self, topic: str, value: Any = None, key: Any = None, *,
                            partition: int | None = None, timestamp_ms: int | None = None,
                            headers: Any = None, **kwargs: Any) -> Any:
        t = self._telemetry
        span, carrier, started = t.start_send(topic, key, partition, headers)
        try:
            md = await self._client.send_and_wait(topic, value, key, partition=partition,
                                                  timestamp_ms=timestamp_ms, headers=carrier,
                                                  **kwargs)
        except BaseException as exc:
            t.end_send(span, started, topic, None, exc)
            raise
        t.end_send(span, started, topic, md, None)
        return md


class _ProcessScope:
    """The current record's ``process`` span and the context token that makes it current."""

    def __init__(self) -> None:
        self.span: Any = None
        self.token: Any = None

    def end(self) -> None:
        if self.token is not None:
            try:
                otel_context.detach(self.token)
            except Exception:  # detached from another context (a different task/thread)
                pass
            self.token = None
        if self.span is not None:
            self.span.end()
            self.span = None

    def begin(self, span: Any) -> None:
        self.span = span
        self.token = otel_context.attach(trace.set_span_in_context(span))


class TracedConsumer(_Wrapper):
    """A sync :class:`~kontrakt.clients.consumer.Consumer` that traces what it hands out."""

    def __init__(self, client: Any, telemetry: _Telemetry) -> None:
        super().__init__(client, telemetry)
        self._scope = _ProcessScope()

    def poll(self, timeout: float | None = None) -> Any:
        self._scope.end()
        record = self._client.poll(timeout)
        if record is not None:
            self._scope.begin(self._telemetry.process_span(record))
        return record

    def getmany(self, *args: Any, **kwargs: Any) -> Any:
        self._scope.end()
        out = self._client.getmany(*args, **kwargs)
        self._telemetry.receive_span(r for records in out.values() for r in records)
        return out

    def consume(self, *args: Any, **kwargs: Any) -> Any:
        self._scope.end()
        out = self._client.consume(*args, **kwargs)
        self._telemetry.receive_span(out)
        return out

    def close(self, *args: Any, **kwargs: Any) -> Any:
        self._scope.end()
        return self._client.close(*args, **kwargs)

    def __exit__(self, *exc: Any) -> Any:
        self._scope.end()
        return self._client.__exit__(*exc)


class AsyncTracedConsumer(_Wrapper):
    """An :class:`~kontrakt.clients.consumer.AsyncConsumer` that traces what it hands out."""

    def __init__(self, client: Any, telemetry: _Telemetry) -> None:
        super().__init__(client, telemetry)
        self._scope = _ProcessScope()

    async def poll(self, timeout: float | None = None) -> Any:
        self._scope.end()
        record = await self._client.poll(timeout)
        if record is not None:
            self._scope.begin(self._telemetry.process_span(record))
        return record

    async def getmany(self, *args: Any, **kwargs: Any) -> Any:
        self._scope.end()
        out = await self._client.getmany(*args, **kwargs)
        self._telemetry.receive_span(r for records in out.values() for r in records)
        return out

    async def consume(self, *args: Any, **kwargs: Any) -> Any:
        self._scope.end()
        out = await self._client.consume(*args, **kwargs)
        self._telemetry.receive_span(out)
        return out

    async def close(self, *args: Any, **kwargs: Any) -> Any:
        self._scope.end()
        return await self._client.close(*args, **kwargs)

    async def __aexit__(self, *exc: Any) -> Any:
        self._scope.end()
        return await self._client.__aexit__(*exc)


def instrument_producer(producer: Any, *, tracer_provider: Any = None,
                        meter_provider: Any = None) -> Any:
    """Wrap a Producer or AsyncProducer (or a SerializingProducer, whose serializers then run
    inside the span) so that each record sent is traced and counted.

    Args:
        producer: the client to instrument; keep using the returned wrapper instead.
        tracer_provider, meter_provider: OpenTelemetry providers; the global ones when None.

    Returns:
        A :class:`TracedProducer` (sync clients) or :class:`AsyncTracedProducer`.
    """
    import inspect

    telemetry = _Telemetry(tracer_provider, meter_provider,
                           _config_value(producer, "client.id"), None)
    if inspect.iscoroutinefunction(getattr(producer, "send", None)):
        return AsyncTracedProducer(producer, telemetry)
    return TracedProducer(producer, telemetry)


def instrument_consumer(consumer: Any, *, tracer_provider: Any = None,
                        meter_provider: Any = None) -> Any:
    """Wrap a Consumer or AsyncConsumer (or a DeserializingConsumer) so that each record it
    hands out is traced and counted.

    Args:
        consumer: the client to instrument; keep using the returned wrapper instead.
        tracer_provider, meter_provider: OpenTelemetry providers; the global ones when None.

    Returns:
        A :class:`TracedConsumer` (sync clients) or :class:`AsyncTracedConsumer`.
    """
    import inspect

    telemetry = _Telemetry(tracer_provider, meter_provider,
                           _config_value(consumer, "client.id"),
                           _config_value(consumer, "group.id"))
    if inspect.iscoroutinefunction(getattr(consumer, "poll", None)):
        return AsyncTracedConsumer(consumer, telemetry)
    return TracedConsumer(consumer, telemetry)
