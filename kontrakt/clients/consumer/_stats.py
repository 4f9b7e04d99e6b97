"""The consumer's part of ``stats_cb``'s JSON, in librdkafka's statistics names.

Only fields whose meaning Kontrakt has are filled (librdkafka's STATISTICS.md):

- top level: ``rxmsgs`` / ``rxmsg_bytes`` (records handed to the application, fetched bytes
  of the fetches they came in), ``msg_size`` (bytes buffered);
- ``topics.<t>.partitions.<p>``: ``fetch_state``, ``app_offset``, ``stored_offset``,
  ``hi_offset``, ``ls_offset``, ``lo_offset``, ``consumer_lag``, and ``rxmsgs`` / ``rxbytes``
  (records and record bytes received for the partition from the brokers, as librdkafka's
  per-partition counters: decoded into the buffer, handed out or not);
- ``cgrp`` (consumers with a ``group.id``): ``join_state`` (``steady`` while a member, else
  ``init``), ``rebalance_cnt`` (assignments received), ``assignment_size``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kontrakt._types import OFFSET_INVALID

if TYPE_CHECKING:
    from kontrakt.clients.consumer._consumer import AsyncConsumer

__all__ = ["consumer_statistics"]


def consumer_statistics(c: AsyncConsumer[Any, Any]) -> dict[str, Any]:
    """stats_cb's consumer fields (on the consumer's loop thread)."""
    buf = c._buffer
    with buf.lock:
        records, size = buf.consumed_counts()
        states = list(c._subs.assignment.items())
        buffered = buf.total_bytes
    received = c._fetcher.metrics.received
    topics: dict[str, Any] = {}
    for tp, st in states:
        pos = st.position
        lag = c.lag(tp)
        got = received.get(tp, (0, 0))
        parts = topics.setdefault(tp.topic, {"topic": tp.topic, "partitions": {}})
        parts["partitions"][str(tp.partition)] = {
            "partition": tp.partition,
            "fetch_state": "paused" if st.paused else "active",
            "app_offset": OFFSET_INVALID if pos is None else pos.offset,
            "stored_offset": OFFSET_INVALID if st.stored is None else st.stored.offset,
            "hi_offset": -1 if st.highwater is None else st.highwater,
            "ls_offset": -1 if st.last_stable_offset is None else st.last_stable_offset,
            "lo_offset": -1 if st.log_start_offset is None else st.log_start_offset,
            "consumer_lag": -1 if lag is None else lag,
            "rxmsgs": got[0],
            "rxbytes": got[1],
        }
    doc: dict[str, Any] = {"rxmsgs": records, "rxmsg_bytes": size, "msg_size": buffered,
                           "topics": topics}
    group = c._coordinator
    if group is not None:
        doc["cgrp"] = {
            "join_state": "steady" if group.generation >= 0 else "init",
            "rebalance_cnt": group.rebalances,
            "assignment_size": len(states),
        }
    return doc
