"""Fetch: high watermark, log start, max bytes, long polling, read_committed, and
incremental fetch sessions (KIP-227).

Sessions follow Kafka's FetchSession rules: epoch 0 opens a session (a full response that
names its id), each later request must carry the next epoch and lists only the partitions
whose fetch state changed (plus ``forgotten_topics_data``), and the response lists only the
partitions with records, an error, or a high watermark / last stable offset / log start
offset that moved since the last response. Epoch -1 closes the session.
"""

from __future__ import annotations

import itertools
import time
import uuid
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, Final

from kontrakt.protocol import errors as E
from kontrakt.protocol.messages import FetchResponse
from kontrakt.protocol.spec import Response
from kontrakt.testing._cluster._data import epoch_error
from kontrakt.testing._cluster._state import ClusterState, RequestContext

__all__ = ["FetchHandler"]

_READ_COMMITTED = 1
_INITIAL_EPOCH, _FINAL_EPOCH = 0, -1
#: Sessions kept per broker (Kafka's max.incremental.fetch.session.cache.slots is 1000).
_MAX_SESSIONS: Final = 1000
_PD = FetchResponse.FetchableTopicResponse.PartitionData


@dataclass(slots=True)
class _Wanted:
    """One partition a fetch (or a session) asks for."""

    topic: str
    topic_id: uuid.UUID
    partition: int
    fetch_offset: int
    max_bytes: int
    leader_epoch: int
    # (error, high watermark, last stable offset, log start) last sent in this session
    last: tuple[int, int, int, int] | None = None


@dataclass(slots=True)
class _Session:
    session_id: int
    epoch: int  # the epoch the next request must carry
    parts: OrderedDict[tuple[str | uuid.UUID, int], _Wanted]


class FetchHandler:
    """The Fetch API over one :class:`ClusterState`, with per-broker session caches."""

    def __init__(self, state: ClusterState) -> None:
        self.state = state
        self.sessions: dict[int, OrderedDict[int, _Session]] = {}
        self._ids = itertools.count(1)

    async def fetch(self, ctx: RequestContext, version: int, req: Any) -> Response:
        st = self.state
        by_id = version >= 13
        cache = self.sessions.setdefault(ctx.node_id, OrderedDict())
        sid, epoch = (req.session_id, req.session_epoch) if version >= 7 else (0, -1)
        session: _Session | None = None
        incremental = False
        wanted = [self._wanted(ft, fp, by_id) for ft in req.topics for fp in ft.partitions]
        if epoch == _INITIAL_EPOCH:
            cache.pop(sid, None)
            # Epoch 0 now; the response below moves it to 1, the epoch the next request carries.
            session = _Session(next(self._ids), 0, OrderedDict(
                (_key(w, by_id), w) for w in wanted))
            cache[session.session_id] = session
            while len(cache) > _MAX_SESSIONS:
                cache.popitem(last=False)
        elif epoch == _FINAL_EPOCH:
            if sid:
                cache.pop(sid, None)
        else:
            session = cache.get(sid)
            if session is None:
                return FetchResponse(error_code=E.FetchSessionIdNotFoundError.code,
                                     session_id=0)
            if epoch != session.epoch:
                return FetchResponse(error_code=E.InvalidFetchSessionEpochError.code,
                                     session_id=0)
            for w in wanted:
                old = session.parts.get(_key(w, by_id))
                if old is not None:
                    w.last = old.last
                session.parts[_key(w, by_id)] = w
            for forgotten in req.forgotten_topics_data:
                name = forgotten.topic_id if by_id else forgotten.topic
                for p in forgotten.partitions:
                    session.parts.pop((name, p), None)
            incremental = True
        if session is not None:
            wanted = list(session.parts.values())
        deadline = time.monotonic() + max(req.max_wait_ms, 0) / 1000
        while True:
            out, size = self._read(ctx, version, req, wanted, incremental)
            remaining = deadline - time.monotonic()
            if size >= req.min_bytes or remaining <= 0 or not st.brokers[ctx.node_id].up:
                break
            await st.wait_change(remaining)
        if session is not None:
            session.epoch = session.epoch + 1 if session.epoch < 2**31 - 1 else 1
            cache.move_to_end(session.session_id)
            for w, data in out:
                w.last = _summary(data)
        topics: OrderedDict[tuple[str, uuid.UUID], list[Any]] = OrderedDict()
        for w, data in out:
            topics.setdefault((w.topic, w.topic_id), []).append(data)
        fr = FetchResponse
        return fr(error_code=0, session_id=session.session_id if session else 0, responses=[
            fr.FetchableTopicResponse(topic=name, topic_id=tid, partitions=parts)
            for (name, tid), parts in topics.items()])

    def _wanted(self, ft: Any, fp: Any, by_id: bool) -> _Wanted:
        name = ft.topic
        if by_id:
            topic = self.state.topics_by_id.get(ft.topic_id)
            name = topic.name if topic is not None else ""
        return _Wanted(name, ft.topic_id, fp.partition, fp.fetch_offset,
                       fp.partition_max_bytes, fp.current_leader_epoch)

    def _read(self, ctx: RequestContext, version: int, req: Any, wanted: list[_Wanted],
              incremental: bool) -> tuple[list[tuple[_Wanted, Any]], int]:
        """Partition data for ``wanted`` (only the changed ones when ``incremental``)."""
        st = self.state
        by_id = version >= 13
        committed = req.isolation_level == _READ_COMMITTED
        budget = req.max_bytes if req.max_bytes > 0 else 2**31 - 1
        total = 0
        out = []
        for w in wanted:
            topic = st.topics_by_id.get(w.topic_id) if by_id else st.topics.get(w.topic)
            log = None
            if topic is None or not 0 <= w.partition < len(topic.partitions):
                error = (E.UnknownTopicIdError.code if by_id
                         else E.UnknownTopicOrPartitionError.code)
            else:
                log = topic.partitions[w.partition]
                error = st.leader_error(topic, w.partition, ctx.node_id) \
                    or epoch_error(log, w.leader_epoch)
            if error or log is None:
                data = _PD(partition_index=w.partition, error_code=error, high_watermark=-1,
                           records=None)
            elif not log.log_start_offset <= w.fetch_offset <= log.log_end_offset:
                data = _PD(partition_index=w.partition, error_code=E.OffsetOutOfRangeError.code,
                           high_watermark=log.high_watermark,
                           last_stable_offset=log.last_stable_offset,
                           log_start_offset=log.log_start_offset, records=None)
            else:
                limit = log.last_stable_offset if committed else log.high_watermark
                records, upper = log.read(w.fetch_offset, limit,
                                          min(w.max_bytes, budget - total),
                                          at_least_one=total == 0)
                total += len(records)
                aborted = None
                if committed:
                    aborted = [_PD.AbortedTransaction(producer_id=a.producer_id,
                                                      first_offset=a.first_offset)
                               for a in log.aborted_between(w.fetch_offset, upper)]
                data = _PD(partition_index=w.partition, error_code=0,
                           high_watermark=log.high_watermark,
                           last_stable_offset=log.last_stable_offset,
                           log_start_offset=log.log_start_offset,
                           aborted_transactions=aborted, records=records)
            # Kafka always answers partitions with an error; others only when they changed.
            if incremental and not data.records and not data.error_code \
                    and w.last == _summary(data):
                continue
            out.append((w, data))
        return out, total


def _key(w: _Wanted, by_id: bool) -> tuple[str | uuid.UUID, int]:
    return (w.topic_id if by_id else w.topic, w.partition)


def _summary(data: Any) -> tuple[int, int, int, int]:
    return (data.error_code, data.high_watermark, data.last_stable_offset,
            data.log_start_offset)
