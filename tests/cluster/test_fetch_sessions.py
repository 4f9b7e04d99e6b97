"""Incremental fetch sessions (KIP-227) on the wire, by Kafka's FetchSession rules; Tansu never
opens a session, so Kontrakt's incremental fetch path had no faithful peer before."""

from __future__ import annotations

from typing import Any

from kontrakt import Consumer
from kontrakt._types import TopicPartition as TP
from kontrakt.protocol import errors as E
from kontrakt.protocol.messages import FetchRequest
from kontrakt.testing import Cluster, send_request
from tests.cluster.conftest import batch, leader_address
from tests.cluster.test_data_path import produce

FR = FetchRequest


def _fetch(address: str, topic: str, session_id: int, epoch: int,
           parts: dict[int, int], forget: list[int] | None = None) -> Any:
    return send_request(address, FR(
        max_wait_ms=0, min_bytes=0, max_bytes=1 << 20, session_id=session_id,
        session_epoch=epoch,
        topics=[FR.FetchTopic(topic=topic, partitions=[FR.FetchTopic.FetchPartition(
            partition=p, fetch_offset=o, partition_max_bytes=1 << 20)
            for p, o in parts.items()])] if parts else [],
        forgotten_topics_data=[FR.ForgottenTopic(topic=topic, partitions=forget)]
        if forget else []), 11)


def _listed(resp: Any) -> dict[int, int]:
    """partition -> high watermark of the partitions a response lists."""
    return {p.partition_index: p.high_watermark for t in resp.responses for p in t.partitions}


def test_sessions_send_only_what_changed(topic: str) -> None:
    with Cluster(1) as cluster:
        cluster.create_topic(topic, partitions=3)
        address = leader_address(cluster, topic, 0)
        produce(cluster, topic, batch([b"a"]), partition=0)
        opened = _fetch(address, topic, 0, 0, {0: 0, 1: 0, 2: 0})
        sid = opened.session_id
        assert sid != 0 and _listed(opened) == {0: 1, 1: 0, 2: 0}
        # Nothing moved: an incremental fetch lists no partition.
        assert _listed(_fetch(address, topic, sid, 1, {0: 1})) == {}
        produce(cluster, topic, batch([b"b", b"c"]), partition=2)
        changed = _fetch(address, topic, sid, 2, {})
        assert _listed(changed) == {2: 2}  # its records, fetched from the cached offset 0
        assert _fetch(address, topic, sid, 2, {}).error_code == \
            E.InvalidFetchSessionEpochError.code
        assert _fetch(address, topic, sid + 99, 1, {}).error_code == \
            E.FetchSessionIdNotFoundError.code
        produce(cluster, topic, batch([b"d"]), partition=1)
        forgot = _fetch(address, topic, sid, 3, {2: 2}, forget=[1])
        assert _listed(forgot) == {}  # partition 1 moved but was forgotten
        closed = _fetch(address, topic, sid, -1, {1: 0})
        assert closed.session_id == 0 and _listed(closed) == {1: 1}
        assert _fetch(address, topic, sid, 4, {}).error_code == \
            E.FetchSessionIdNotFoundError.code


def test_kontrakt_consumer_over_sessions_reads_everything(topic: str) -> None:
    with Cluster(1) as cluster:
        cluster.create_topic(topic, partitions=4)
        with Consumer(bootstrap_servers=cluster.bootstrap_servers,
                      auto_offset_reset="earliest", fetch_max_wait_ms=50) as c:
            c.assign([TP(topic, p) for p in range(4)])
            got = []
            for round_ in range(5):
                produce(cluster, topic, batch([b"%d" % round_] * 3), partition=round_ % 4)
                deadline = 50
                while len(got) < 3 * (round_ + 1) and deadline:
                    got.extend(c.getmany(timeout=0.2).get(TP(topic, round_ % 4), []))
                    deadline -= 1
            assert len(got) == 15
            assert sorted(r.offset for r in got if r.partition == 0) == [0, 1, 2, 3, 4, 5]
            # The consumer stayed in one session and moved through its epochs (a session
            # error would have made it start over at epoch 0 with a new session).
            fetch = cluster._server.handlers[1].__self__  # type: ignore[union-attr]
            sessions = list(fetch.sessions[1].values())
            assert len(sessions) == 1 and sessions[0].session_id == 1
            assert sessions[0].epoch >= 3
        assert cluster.internal_errors() == []


def test_a_seek_during_a_fetch_does_not_lose_the_high_watermark(
        topic: str, monkeypatch: Any) -> None:
    """A fetch answered after a seek to the offset it fetched from is dropped as stale; the
    broker's session counts that answer as seen, and an incremental fetch lists a partition
    only when it changed, so its high watermark would never come again (the Spark planner
    waited 30 s for it). The consumer starts over with a full fetch instead."""
    import asyncio

    from kontrakt.clients._net.connection import BrokerConnection
    from kontrakt.clients.consumer import AsyncConsumer

    tp = TP(topic, 0)
    real_send = BrokerConnection.send
    seeks: list[int] = []

    async def main(cluster: Cluster) -> int | None:
        consumer = AsyncConsumer({"bootstrap.servers": cluster.bootstrap_servers,
                                  "enable.auto.commit": False, "fetch.max.wait.ms": 10})

        async def send(conn: BrokerConnection, request: Any, **kwargs: Any) -> Any:
            resp = await real_send(conn, request, **kwargs)
            if isinstance(request, FetchRequest) and not seeks:
                seeks.append(1)
                consumer.seek(tp, 3)  # where it fetched from: only its gen moves
            return resp

        monkeypatch.setattr(BrokerConnection, "send", send)
        async with consumer:
            consumer.assign([tp])
            consumer.seek(tp, 3)
            for _ in range(40):  # 2 s at most
                await consumer.getmany(timeout_ms=50)
                if consumer.lag(tp) is not None:
                    break
            return consumer.lag(tp)

    with Cluster(1) as cluster:
        cluster.create_topic(topic, partitions=1)
        produce(cluster, topic, batch([b"a", b"b", b"c"]))
        assert asyncio.run(main(cluster)) == 0
    assert seeks == [1]
