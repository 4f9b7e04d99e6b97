"""The fetcher moves positions from the loop thread under the buffer lock, as the
application's seek() does, so a sync consumer's poll() on another thread never races it."""

from __future__ import annotations

import threading
from types import SimpleNamespace
from typing import Any

from kontrakt import ConsumerRecord, TimestampType, TopicPartition
from kontrakt._config import ClientConfig
from kontrakt.clients.consumer._config import CONSUMER_OPTIONS, consumer_settings
from kontrakt.clients.consumer._fetcher import CompletedFetch, FetchBuffer, Fetcher
from kontrakt.clients.consumer._subscription import SubscriptionState


def _fetcher() -> Fetcher:
    cfg = consumer_settings(ClientConfig(CONSUMER_OPTIONS, None))
    client: Any = object()  # never used: nothing is fetched here
    return Fetcher(client, SubscriptionState(), FetchBuffer(1 << 20), cfg)


def test_truncation_seek_waits_for_a_drain_on_another_thread() -> None:
    # A sync consumer's poll() drains on the application's thread while the loop handles
    # fetch responses. A truncation seek must take the buffer lock like seek() does: between
    # drain's generation check and its position update, an unlocked seek was overwritten by
    # the end of a fetch it had made stale (the consumer then skipped the re-read).
    f = _fetcher()
    tp = TopicPartition("t", 0)
    f.subs.assign([tp])
    st = f.subs.state(tp)
    st.seek(0, 3)
    recs = [ConsumerRecord("t", 0, o, 0, TimestampType.CREATE_TIME, None, b"v", [], 3)
            for o in range(10)]
    f.buffer.add(CompletedFetch(tp, st, st.gen, recs, 10, 3, 100))
    pd = SimpleNamespace(high_watermark=10, last_stable_offset=-1, log_start_offset=-1,
                         diverging_epoch=SimpleNamespace(epoch=2, end_offset=4), records=b"")
    f.buffer.lock.acquire()  # poll() in the middle of a drain
    try:
        t = threading.Thread(target=f._partition_ok, args=(tp, st, 10, pd))
        t.start()
        t.join(0.2)
        assert t.is_alive(), "the truncation seek did not wait for the drain"
        assert st.position is not None and st.position.offset == 0
    finally:
        f.buffer.lock.release()
    t.join(5)
    assert not t.is_alive()
    assert st.position is not None and st.position.offset == 4
    # The fetch the seek made stale hands out nothing and leaves the position alone.
    assert f.buffer.drain(100) == {}
    assert st.position.offset == 4
