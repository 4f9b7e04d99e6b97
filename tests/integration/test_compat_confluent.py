"""kontrakt.compat.confluent_kafka: confluent-kafka code runs with only its import changed,
on Tansu; its results are checked against confluent-kafka itself reading the same topic."""

from __future__ import annotations

import pytest

from kontrakt.compat.confluent_kafka import (
    OFFSET_BEGINNING,
    TIMESTAMP_CREATE_TIME,
    Consumer,
    KafkaError,
    KafkaException,
    Message,
    Producer,
    TopicPartition,
)
from kontrakt.errors import KafkaTimeoutError
from kontrakt.testing import TansuBroker

pytestmark = [pytest.mark.integration, pytest.mark.interop, pytest.mark.timeout(90)]


def test_a_confluent_kafka_program_runs_with_the_import_changed(
        tansu_broker: TansuBroker, topic_name: str) -> None:
    tansu_broker.create_topic(topic_name, 1)
    bs = tansu_broker.bootstrap_servers
    reports: list[tuple[KafkaError | None, Message]] = []

    # --- the program, as written for confluent-kafka ---
    p = Producer({"bootstrap.servers": bs, "queue.buffering.max.ms": 1,
                  "on_delivery": lambda err, msg: reports.append((err, msg))})
    for i in range(5):
        p.produce(topic_name, value=f"v{i}".encode(), key=b"k")
    assert p.flush(10) == 0
    p.close()
    assert [(e, m.topic(), m.offset(), m.value()) for e, m in reports] == [
        (None, topic_name, i, f"v{i}".encode()) for i in range(5)]

    c = Consumer({"bootstrap.servers": bs, "group.id": f"g-{topic_name}",
                  "auto.offset.reset": "earliest", "enable.partition.eof": False,
                  "session.timeout.ms": 1000, "heartbeat.interval.ms": 100,
                  "enable.auto.commit": False})
    c.subscribe([f"^{topic_name}$"])
    got: list[Message] = []
    for _ in range(200):
        msg = c.poll(0.1)
        if msg is None:
            continue
        if msg.error():
            raise KafkaException(msg.error())
        got.append(msg)
        if len(got) == 5:
            break
    assert [m.value() for m in got] == [f"v{i}".encode() for i in range(5)]
    assert got[0].key() == b"k" and got[0].partition() == 0 and len(got[0]) == 2
    assert got[0].timestamp()[0] == TIMESTAMP_CREATE_TIME and got[0].timestamp()[1] > 0
    committed = c.commit(message=got[2], asynchronous=False)
    assert committed == [TopicPartition(topic_name, 0)] and committed[0].offset == 3
    assert c.committed([TopicPartition(topic_name, 0)])[0].offset == 3
    c.seek(TopicPartition(topic_name, 0, OFFSET_BEGINNING))
    assert c.consume(1, timeout=10)[0].value() == b"v0"
    with pytest.raises(KafkaException) as info:
        c.position([TopicPartition("not-assigned", 0)])
    err = info.value.args[0]
    assert err.code() == KafkaError._STATE and not err.retriable() and not err.fatal()
    c.close()
    # --- end of the program ---

    with pytest.raises(KafkaException) as info:
        c.poll(0)
    assert info.value.args[0].name() == "_STATE"


def test_errors_carry_confluent_codes() -> None:
    err = KafkaError.of(KafkaTimeoutError("slow"))
    assert err.code() == KafkaError._TIMED_OUT and err.retriable() and err.str() == "slow"
    from kontrakt.protocol.errors import UnknownTopicOrPartitionError

    broker = KafkaError.of(UnknownTopicOrPartitionError())
    assert broker == KafkaError.UNKNOWN_TOPIC_OR_PART == 3
    assert broker.name() == "UNKNOWN_TOPIC_OR_PARTITION" and broker.retriable()


def test_confluent_kafka_reads_what_the_compat_producer_wrote(
        tansu_broker: TansuBroker, topic_name: str) -> None:
    ck = pytest.importorskip("confluent_kafka")
    tansu_broker.create_topic(topic_name, 1)
    bs = tansu_broker.bootstrap_servers
    p = Producer({"bootstrap.servers": bs})
    p.produce(topic_name, b"hello", headers=[("h", b"1")])
    p.flush(10)
    p.close()
    ref = ck.Consumer({"bootstrap.servers": bs, "group.id": f"ref-{topic_name}",
                       "auto.offset.reset": "earliest"})
    try:
        ref.assign([ck.TopicPartition(topic_name, 0, 0)])
        msg = None
        for _ in range(100):
            msg = ref.poll(0.2)
            if msg is not None and not msg.error():
                break
        assert msg is not None and msg.value() == b"hello" and msg.headers() == [("h", b"1")]
    finally:
        ref.close()


def test_on_assign_chooses_where_the_assigned_partitions_start(
        tansu_broker: TansuBroker, topic_name: str) -> None:
    """confluent-kafka's idiom: on_assign sets each partition's offset and calls
    consumer.assign(partitions); here auto.offset.reset=latest would read nothing."""
    tansu_broker.create_topic(topic_name, 2)
    bs = tansu_broker.bootstrap_servers
    p = Producer({"bootstrap.servers": bs})
    for i in range(6):
        p.produce(topic_name, f"v{i}".encode(), partition=i % 2)
    p.flush(10)
    p.close()
    seen: list[tuple[str, list[TopicPartition]]] = []

    def on_assign(consumer: Consumer, partitions: list[TopicPartition]) -> None:
        seen.append(("assign", list(partitions)))
        for tp in partitions:
            tp_at = TopicPartition(tp.topic, tp.partition, OFFSET_BEGINNING)
            consumer.assign([tp_at])

    def on_revoke(consumer: Consumer, partitions: list[TopicPartition]) -> None:
        seen.append(("revoke", list(partitions)))

    c = Consumer({"bootstrap.servers": bs, "group.id": f"g-{topic_name}",
                  "auto.offset.reset": "latest", "session.timeout.ms": 1000,
                  "heartbeat.interval.ms": 100})
    try:
        c.subscribe([topic_name], on_assign=on_assign, on_revoke=on_revoke)
        got = []
        for _ in range(300):
            msg = c.poll(0.1)
            if msg is not None:
                got.append(msg.value())
            if len(got) == 6:
                break
        assert sorted(got) == [f"v{i}".encode() for i in range(6)]
        assert seen[0] == ("assign", [TopicPartition(topic_name, 0),
                                      TopicPartition(topic_name, 1)])
    finally:
        c.close()
    assert seen[-1][0] == "revoke"


def test_produce_batch_reports_and_errors_as_confluent_kafkas(
        tansu_broker: TansuBroker, topic_name: str) -> None:
    """Callbacks get (None, Message) with the message's key and value; a message that could
    not be queued carries a KafkaError as its '_error'; a malformed one raises TypeError."""
    tansu_broker.create_topic(topic_name, 2)
    reports: list[tuple[KafkaError | None, Message]] = []
    p = Producer({"bootstrap.servers": tansu_broker.bootstrap_servers,
                  "message.max.bytes": 10_000,
                  "on_delivery": lambda err, msg: reports.append((err, msg))})
    try:
        with pytest.raises(TypeError, match="must be a dict"):
            p.produce_batch(topic_name, [{"value": b"ok"}, "not a message"])
        messages = [{"key": b"k%d" % i, "value": b"v%d" % i} for i in range(20)]
        messages[7]["value"] = b"x" * 20_000
        assert p.produce_batch(topic_name, messages) == 19
        err = messages[7]["_error"]
        assert isinstance(err, KafkaError) and err.code() == KafkaError.MSG_SIZE_TOO_LARGE
        assert all("_error" not in m for i, m in enumerate(messages) if i != 7)
        p.flush(10)
    finally:
        p.close()
    assert sorted(msg.value() for _, msg in reports) == sorted(
        m["value"] for i, m in enumerate(messages) if i != 7)
    assert all(e is None and msg.key() == b"k" + msg.value()[1:] for e, msg in reports)
