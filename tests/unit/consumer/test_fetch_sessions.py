"""Incremental fetch sessions (KIP-227) against a crafted broker, and the sans-I/O pieces:
FetchSession planning, FetchBuffer positions, SubscriptionState, config."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from kontrakt._types import TopicPartition
from kontrakt.clients.consumer import (
    AsyncConsumer,
    FetchBuffer,
    FetchPosition,
    FetchSession,
    SubscriptionState,
)
from kontrakt.clients.consumer._fetcher import CompletedFetch, parse_partition
from kontrakt.errors import ConfigError, IllegalStateError
from kontrakt.protocol.messages import FetchResponse
from kontrakt.protocol.records import RecordBatchBuilder
from tests._crafted_broker import FakeBroker

TOPIC = "sessions"


def _batch(base: int, n: int) -> bytes:
    b = RecordBatchBuilder(base_offset=base)
    for i in range(n):
        b.append(1, None, str(base + i).encode())
    return b.build()


def test_session_planning() -> None:
    s = FetchSession()
    t0, t1 = TopicPartition("t", 0), TopicPartition("t", 1)
    wanted = {t0: (0, 1, -1), t1: (5, 1, -1)}
    sid, epoch, send, forget, full = s.build(wanted)
    assert (sid, epoch, full, forget) == (0, 0, True, []) and send == wanted
    s.on_response(True, 42, wanted)
    wanted2 = {t0: (3, 1, -1), t1: (5, 1, -1)}
    sid, epoch, send, forget, full = s.build(wanted2)
    assert (sid, epoch, full) == (42, 1, False)
    assert send == {t0: (3, 1, -1)} and forget == []
    s.on_response(False, 42, wanted2)
    sid, epoch, send, forget, full = s.build({t0: (3, 1, -1)})
    assert epoch == 2 and send == {} and forget == [t1]
    s.reset()
    assert s.build({t0: (3, 1, -1)})[4] is True
    # A broker without sessions answers session id 0: every request stays a full one.
    s.on_response(True, 0, wanted)
    assert s.build(wanted)[4] is True
    disabled = FetchSession(enabled=False)
    assert disabled.build(wanted)[1] == -1


def test_incremental_fetches_on_the_wire() -> None:
    seen: list[Any] = []
    sizes = {0: 30, 1: 30}

    async def handle(version: int, req: Any) -> Any:
        seen.append(req)
        R = FetchResponse.FetchableTopicResponse
        P = R.PartitionData
        if req.session_id == 0 and req.session_epoch == 0:
            new_id = 77
        elif len(seen) == 4:
            return FetchResponse(error_code=70, session_id=0)  # session evicted
        else:
            new_id = req.session_id
        parts = []
        for t in req.topics:
            for p in t.partitions:
                n = min(10, sizes[p.partition] - p.fetch_offset)
                if n > 0:
                    parts.append(P(partition_index=p.partition, error_code=0,
                                   high_watermark=sizes[p.partition],
                                   records=_batch(p.fetch_offset, n)))
        if not parts:
            await asyncio.sleep(0.02)
        return FetchResponse(session_id=new_id,
                             responses=[R(topic=TOPIC, partitions=parts)] if parts else [])

    cut = 0

    async def main() -> None:
        nonlocal cut
        async with FakeBroker({TOPIC: 2}, {1: handle}) as broker:  # noqa: SIM117
            async with AsyncConsumer(bootstrap_servers=broker.bootstrap,
                                     fetch_max_wait_ms=10) as c:
                tps = [TopicPartition(TOPIC, 0), TopicPartition(TOPIC, 1)]
                c.assign(tps)
                for tp in tps:
                    c.seek(tp, 0)
                got: dict[TopicPartition, list[int]] = {tp: [] for tp in tps}
                for _ in range(200):
                    for tp, recs in (await c.getmany(timeout=0.1)).items():
                        got[tp].extend(r.offset for r in recs)
                    if all(len(v) >= 30 for v in got.values()):
                        break
                assert got == {tp: list(range(30)) for tp in tps}
                c.assign([tps[0]])
                await asyncio.sleep(0)  # let a fetch already planned go out
                cut = len(seen) + 1
                for _ in range(5):
                    await c.getmany(timeout=0.05)
        first = seen[0]
        assert (first.session_id, first.session_epoch) == (0, 0)
        incremental = [r for r in seen[1:3]]
        assert all(r.session_id == 77 for r in incremental)
        assert [r.session_epoch for r in incremental] == [1, 2]
        # After the session error the consumer starts over with a full fetch.
        assert (seen[4].session_id, seen[4].session_epoch) == (0, 0)
        # Once unassigned, partition 1 is never fetched again (forgotten from the session,
        # or absent from the next full request; the planning test covers the forgetting).
        assert all(p.partition == 0 for r in seen[cut:] for t in r.topics for p in t.partitions)

    asyncio.run(main())


def _records(n: int, start: int = 0) -> list[Any]:
    data = _batch(start, n)
    recs, nxt, _ = parse_partition("t", 0, data, start, read_committed=False, aborted=None,
                                   check_crcs=True)
    assert nxt == start + n
    return recs


def test_buffer_moves_positions_only_when_records_are_handed_out() -> None:
    subs = SubscriptionState()
    tp = TopicPartition("t", 0)
    subs.assign([tp])
    subs.seek(tp, 0)
    st = subs.state(tp)
    buf = FetchBuffer(1 << 20)
    buf.add(CompletedFetch(tp, st, st.gen, _records(5), 6, 0, 100))  # 5 is a control record
    assert st.position == FetchPosition(0, -1)
    first = buf.drain_one()
    assert first is not None and first.offset == 0
    assert st.position is not None and st.position.offset == 1
    got = buf.drain(2)
    assert [r.offset for r in got[tp]] == [1, 2]
    assert st.position.offset == 3
    subs.pause([tp])
    assert buf.drain(10) == {} and buf.has_data()
    subs.resume([tp])
    assert [r.offset for r in buf.drain(10)[tp]] == [3, 4]
    assert st.position == FetchPosition(6, 0)  # past the trailing control record
    assert st.buffered_bytes == 0 and buf.total_bytes == 0
    # Data from before a seek is dropped, never returned.
    buf.add(CompletedFetch(tp, st, st.gen, _records(3, 6), 9, 0, 50))
    subs.seek(tp, 100)
    assert buf.drain(10) == {}
    assert st.position == FetchPosition(100, -1)


def test_subscription_state_rules() -> None:
    subs = SubscriptionState()
    subs.subscribe(["a", "b"], None)
    with pytest.raises(IllegalStateError):
        subs.assign([TopicPartition("a", 0)])
    with pytest.raises(ValueError):
        subs.subscribe(["a"], "a.*")
    subs.unsubscribe()
    subs.subscribe(None, r"orders\..*")
    assert subs.match_pattern(["orders.eu", "orders", "x", "__consumer_offsets"],
                              internal=["__consumer_offsets"]) == {"orders.eu"}
    subs.unsubscribe()
    subs.assign([TopicPartition("a", 0)])
    with pytest.raises(IllegalStateError):
        subs.subscribe(["a"], None)
    with pytest.raises(IllegalStateError):
        subs.seek(TopicPartition("b", 0), 1)
    with pytest.raises(ValueError):
        subs.seek(TopicPartition("a", 0), -1)
    assert subs.missing_positions() == [TopicPartition("a", 0)]
    subs.request_reset(TopicPartition("a", 0), "earliest")
    assert subs.pending_resets() == {TopicPartition("a", 0): "earliest"}


def test_config_validation() -> None:
    with pytest.raises(ConfigError, match=r"group\.id"):
        AsyncConsumer({"bootstrap.servers": "127.0.0.1:1", "group.idd": "x"})
    with pytest.raises(ConfigError, match=r"auto\.offset\.reset"):
        AsyncConsumer(bootstrap_servers="127.0.0.1:1", auto_offset_reset="middle")
    with pytest.raises(ConfigError, match="assignor"):
        AsyncConsumer(bootstrap_servers="127.0.0.1:1", group_id="g",
                      partition_assignment_strategy="fancy")
    c = AsyncConsumer(bootstrap_servers="127.0.0.1:1", auto_offset_reset="smallest")
    assert c._subs.default_reset == "earliest"
    with pytest.raises(ConfigError, match=r"group\.id"):
        c.subscribe(["t"])
    cc = AsyncConsumer(bootstrap_servers="127.0.0.1:1", group_id="g",
                       partition_assignment_strategy=["range", "cooperative-sticky"])
    assert [a.name for a in cc._coordinator.assignors] == ["range", "cooperative-sticky"]
