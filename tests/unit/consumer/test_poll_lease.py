"""A per-record ``poll()`` takes records off a lease without the buffer's lock
(``FetchBuffer.drain_one``, ``Lease``): whatever ends the lease (seek, reset, pause,
revocation, an error, ``clear()``), on this thread or another, no record of it is handed out
after that has returned, the position stays exactly past the last record handed out, and a
commit never covers a record that poll() has not returned (sans-I/O: the buffer and the
subscription state; the threads race the real code, with a short switch interval)."""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from kontrakt import ConsumerRecord, TimestampType, TopicPartition
from kontrakt.clients.consumer._buffer import CompletedFetch, FetchBuffer
from kontrakt.clients.consumer._subscription import (
    FetchPosition,
    PartitionState,
    SubscriptionState,
)
from kontrakt.errors import KafkaError

A, B = TopicPartition("t", 0), TopicPartition("t", 1)


def _records(tp: TopicPartition, first: int, count: int) -> list[Any]:
    return [ConsumerRecord(tp.topic, tp.partition, o, 0, TimestampType.CREATE_TIME, None,
                           b"v", [], 3) for o in range(first, first + count)]


def _setup(count: int = 10) -> tuple[SubscriptionState, FetchBuffer]:
    """A then B, one fetch of ``count`` records each, from offset 0."""
    subs, buf = SubscriptionState(), FetchBuffer(1 << 30)
    subs.assign([A, B])
    for tp in (A, B):
        st = subs.state(tp)
        st.seek(0, 3)
        buf.add(CompletedFetch(tp, st, st.gen, _records(tp, 0, count), count, 3, 10))
    return subs, buf


def _pos(subs: SubscriptionState, tp: TopicPartition) -> int | None:
    pos = subs.state(tp).position
    return None if pos is None else pos.offset


@pytest.fixture
def fast_switching() -> Iterator[None]:
    """Threads switch every microsecond, so that the races below are hit."""
    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        yield
    finally:
        sys.setswitchinterval(old)


_SEQ: Any = PartitionState.__dict__["poll_seq"]  # the slots
_FIRST: Any = PartitionState.__dict__["first_unacked"]


class _Interleaved(PartitionState):
    """A partition state that runs ``hooks[name]`` (once) right after ``name`` is read
    (returning what was read), or right before ``first_unacked`` is written: another
    thread's steps landing exactly there."""

    __slots__ = ()
    hooks: dict[str, Callable[[], None]] = {}

    def _after(self, name: str) -> None:
        hook = self.hooks.pop(name, None)
        if hook is not None:
            hook()

    @property  # type: ignore[override]
    def poll_seq(self) -> int:
        value: int = _SEQ.__get__(self)
        self._after("poll_seq")
        return value

    @poll_seq.setter
    def poll_seq(self, value: int) -> None:
        _SEQ.__set__(self, value)

    @property  # type: ignore[override]
    def first_unacked(self) -> Any:
        return _FIRST.__get__(self)

    @first_unacked.setter
    def first_unacked(self, value: Any) -> None:
        self._after("first_unacked")
        _FIRST.__set__(self, value)

    @property
    def paused(self) -> bool:
        value: bool = PartitionState.paused.fget(self)  # type: ignore[attr-defined]
        self._after("paused")
        return value

    @paused.setter
    def paused(self, value: bool) -> None:
        PartitionState.paused.fset(self, value)  # type: ignore[attr-defined]


@pytest.fixture
def interleaved() -> Iterator[type[_Interleaved]]:
    yield _Interleaved
    _Interleaved.hooks.clear()


# --- on one thread ---------------------------------------------------------------------------

def test_a_pause_in_a_lease_hands_out_nothing_more_and_keeps_the_rest() -> None:
    subs, buf = _setup()
    assert [buf.drain_one().offset for _ in range(3)] == [0, 1, 2]  # type: ignore[union-attr]
    assert buf.lease is not None and buf.lease.state is subs.state(A)
    subs.pause([A])
    assert _pos(subs, A) == 3
    got = [buf.drain_one() for _ in range(10)]
    assert {(r.partition, r.offset) for r in got if r is not None} == {(1, o) for o in range(10)}
    assert buf.drain_one() is None and _pos(subs, A) == 3
    subs.resume([A])
    rest = [buf.drain_one() for _ in range(7)]
    assert [(r.partition, r.offset) for r in rest if r is not None] == \
        [(0, o) for o in range(3, 10)]
    assert _pos(subs, A) == 10 and buf.drain_one() is None and buf.total_bytes == 0


def test_a_seek_reset_or_revocation_in_a_lease_drops_its_records() -> None:
    for change in ("seek", "reset", "revoke", "unassign"):
        subs, buf = _setup()
        assert buf.drain_one().offset == 0  # type: ignore[union-attr]
        st = subs.state(A)
        if change == "seek":
            subs.seek(A, 100)
        elif change == "reset":
            subs.request_reset(A, "earliest")
        elif change == "revoke":  # what a rebalance does before it commits (GroupMembership)
            st.paused = True
            st.gen += 1
        else:
            subs.set_assignment([B])
        got = [buf.drain_one() for _ in range(11)]
        assert [(r.partition, r.offset) for r in got if r is not None] == \
            [(1, o) for o in range(10)], change
        assert st.position == {"seek": FetchPosition(100, -1), "reset": None,
                               "revoke": FetchPosition(1, 3),
                               "unassign": FetchPosition(1, 3)}[change], change


def test_an_error_or_clear_in_a_lease_stops_it() -> None:
    subs, buf = _setup()
    assert buf.drain_one().offset == 0  # type: ignore[union-attr]
    buf.add_error(B, subs.state(B), KafkaError("boom"))
    with pytest.raises(KafkaError):
        buf.drain_one()
    subs.seek(B, 0)  # forgets the error (and B's records)
    assert buf.drain_one().offset == 1  # type: ignore[union-attr]
    assert buf.consumed_counts()[0] == 2
    buf.clear()
    assert buf.drain_one() is None and _pos(subs, A) == 2
    assert buf.consumed_counts()[0] == 2 and buf.total_bytes == 0


def test_a_commit_stops_at_the_record_the_latest_poll_returned() -> None:
    subs, buf = _setup()
    for want in range(4):
        buf.poll_seq += 1  # a poll of a consumer in a group (AsyncConsumer._polled)
        rec = buf.drain_one()
        assert rec is not None and rec.offset == want
        # Auto commit: not past the record being processed; close(): past it.
        assert subs.consumed_offsets(buf.poll_seq)[A].offset == want
        assert subs.consumed_offsets()[A].offset == want + 1


def test_a_commit_that_read_an_older_poll_stops_at_a_newer_polls_record() -> None:
    """An auto commit reads the latest poll under the lock, but a sync poll() bumps it and
    takes its record without the lock meanwhile: that record is still not committed."""
    subs, buf = _setup()
    buf.poll_seq += 1
    assert buf.drain_one().offset == 0  # type: ignore[union-attr]
    seen = buf.poll_seq  # what the commit read
    buf.poll_seq += 1  # the application polls again
    rec = buf.drain_one()
    assert rec is not None and rec.offset == 1
    assert subs.consumed_offsets(seen)[A].offset == 1


def test_a_record_taken_while_a_commit_looks_is_not_committed(
        interleaved: type[_Interleaved]) -> None:
    """The poll lands between the commit's look at the partition's poll mark and its look at
    the position; the commit must not count the record from the position."""
    subs, buf = _setup()
    assert buf.drain_one().offset == 0  # type: ignore[union-attr]
    buf.poll_seq += 1  # a poll that handed out nothing
    st = subs.state(A)
    st.__class__ = interleaved
    taken = []

    def poll() -> None:
        buf.poll_seq += 1
        taken.append(buf.drain_one())
    interleaved.hooks["poll_seq"] = poll
    offset = subs.consumed_offsets(buf.poll_seq)[A].offset
    assert taken[0].offset == 1 and offset <= 1


def test_a_commit_while_poll_marks_its_record(interleaved: type[_Interleaved]) -> None:
    """A commit lands while poll() marks the record it takes (on the thread that polls, the
    commit on the loop's): it must not count the record as processed."""
    subs, buf = _setup()
    assert buf.drain_one().offset == 0  # type: ignore[union-attr]
    st = subs.state(A)
    st.__class__ = interleaved
    commits: list[int] = []
    interleaved.hooks["first_unacked"] = lambda: commits.append(
        subs.consumed_offsets(buf.poll_seq)[A].offset)
    buf.poll_seq += 1
    rec = buf.drain_one()
    assert rec is not None and rec.offset == 1 and commits == [1]


def test_a_seek_while_poll_marks_its_record(interleaved: type[_Interleaved]) -> None:
    """A seek lands after poll() marked the record it was about to take: the record is not
    handed out, and the mark is taken back (a commit goes to the sought offset)."""
    subs, buf = _setup()
    assert buf.drain_one().offset == 0  # type: ignore[union-attr]
    st = subs.state(A)
    st.__class__ = interleaved

    def seek() -> None:
        with buf.lock:
            subs.seek(A, 7)
    interleaved.hooks["first_unacked"] = seek
    buf.poll_seq += 1
    rec = buf.drain_one()
    assert rec is not None and (rec.partition, rec.offset) == (1, 0)
    assert subs.consumed_offsets(buf.poll_seq)[A].offset == 7


def test_a_pause_between_the_buffer_look_and_its_lease(
        interleaved: type[_Interleaved]) -> None:
    """pause() (no lock) lands after the buffer looked at the partition and before it
    published the lease: nothing of the partition is handed out by the polls after."""
    subs, buf = _setup()
    st = subs.state(A)
    st.__class__ = interleaved
    interleaved.hooks["paused"] = lambda: subs.pause([A])
    got = [buf.drain_one() for _ in range(4)]
    # The first poll ran alongside the pause and may take A's first record, no more.
    assert [r.partition for r in got[1:] if r is not None] == [1, 1, 1]
    assert st.position == FetchPosition(1 if got[0].partition == 0 else 0, 3)  # type: ignore[union-attr]


def test_a_stop_that_lands_inside_another_returns_only_once_the_lease_is_marked(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Two threads end a lease at once: here the I/O thread's stop_lease() (a close, a dead
    fetcher) and the application's pause(), which lands between the steps of the first
    stop. Once pause() has returned, the application's next poll hands out nothing more
    of the lease (it takes the lease's records without the lock)."""
    from kontrakt.clients.consumer import _buffer

    live_slot: Any = _buffer.Lease.__dict__["live"]
    hooks: list[Callable[[], None]] = []

    class _SteppedLease(_buffer.Lease):
        """Runs the hook (once) right after ``live`` is cleared."""

        __slots__ = ()

        @property  # type: ignore[override]
        def live(self) -> bool:
            value: bool = live_slot.__get__(self)
            return value

        @live.setter
        def live(self, value: bool) -> None:
            live_slot.__set__(self, value)
            if not value and hooks:
                hooks.pop()()

    monkeypatch.setattr(_buffer, "Lease", _SteppedLease)
    subs, buf = _setup()
    assert buf.drain_one().offset == 0  # type: ignore[union-attr]
    assert type(buf.lease) is _SteppedLease and buf.lease.state is subs.state(A)
    after_pause: list[Any] = []
    polled = threading.Event()

    def application() -> None:
        subs.pause([A])
        after_pause.append(buf.drain_one())  # may wait for the buffer's lock
        polled.set()

    def other_stop_lands_here() -> None:
        t = threading.Thread(target=application)
        t.start()
        # A poll that takes a record without the lock is done at once; one that goes back
        # to the buffer waits for the lock stop_lease holds.
        polled.wait(0.5)

    hooks.append(other_stop_lands_here)
    buf.stop_lease()
    assert polled.wait(10)
    assert [(r.partition, r.offset) for r in after_pause if r is not None] != [(0, 1)], \
        "a record of the lease after pause() returned"
    assert _pos(subs, A) == 1


# --- on two threads --------------------------------------------------------------------------

def _race(subs: SubscriptionState, buf: FetchBuffer, change: Callable[[], None],
          stale: Callable[[Any], bool]) -> tuple[list[Any], list[Any]]:
    """Poll on a thread while ``change`` runs on this one; returns the records handed out
    before and after the poller saw ``change`` returned."""
    done = threading.Event()
    before: list[Any] = []
    after: list[Any] = []
    started = threading.Event()

    def poller() -> None:
        for _ in range(100_000):
            seen = done.is_set()  # change() had returned before this take began
            rec = buf.drain_one()
            if rec is not None:
                (after if seen else before).append(rec)
                started.set()
            elif seen:
                break

    t = threading.Thread(target=poller)
    t.start()
    assert started.wait(10)
    change()
    done.set()
    t.join(30)
    assert not t.is_alive()
    assert not [r for r in after if stale(r)]
    return before, after


@pytest.mark.parametrize("locked", [True, False])
def test_no_record_after_a_pause_on_another_thread(fast_switching: None, locked: bool) -> None:
    for _ in range(20):
        subs, buf = _setup(2000)

        def pause(subs: SubscriptionState = subs, buf: FetchBuffer = buf) -> None:
            if locked:  # as a revocation does
                with buf.lock:
                    subs.pause([A])
            else:  # as AsyncConsumer.pause does
                subs.pause([A])
        before, _ = _race(subs, buf, pause, lambda r: r.partition == 0)
        handed = [r.offset for r in before if r.partition == 0]
        assert handed == list(range(len(handed)))
        # Exactly past the last record handed out: none is lost, none repeated on resume.
        assert _pos(subs, A) == len(handed)
        subs.resume([A])
        rest = [buf.drain_one() for _ in range(2000 - len(handed))]
        assert [r.offset for r in rest if r is not None and r.partition == 0] == \
            list(range(len(handed), 2000))


def test_no_stale_record_after_a_seek_on_another_thread(fast_switching: None) -> None:
    for _ in range(20):
        subs, buf = _setup(2000)

        def seek(subs: SubscriptionState = subs, buf: FetchBuffer = buf) -> None:
            with buf.lock:  # as AsyncConsumer.seek does
                subs.seek(A, 5)
        _race(subs, buf, seek, lambda r: r.partition == 0)
        assert _pos(subs, A) == 5


def test_commits_never_pass_what_poll_returned(fast_switching: None) -> None:
    """A committer on another thread (auto commit: ``consumed_offsets`` with the latest poll
    under the lock) against a group consumer's polls: each commit stops at or before the
    record of the latest poll once it is computed (the application may be processing it); a
    commit of every record handed out (close) never passes the last one returned."""
    subs, buf = _setup(20_000)
    returned: dict[int, int] = {}  # poll number -> offset of A's record it returned
    last = [-1]
    stop = threading.Event()
    commits: list[tuple[int, int]] = []  # (latest poll, auto commit's offset of A)
    ahead: list[tuple[int, int]] = []

    def poller() -> None:
        for _ in range(20_000):
            buf.poll_seq += 1
            seq = buf.poll_seq
            rec = buf.drain_one()
            if rec is None:
                break
            if rec.partition == 0:
                returned[seq] = rec.offset
                last[0] = rec.offset
        stop.set()

    t = threading.Thread(target=poller)
    t.start()
    for _ in range(200_000):
        if stop.is_set():
            break
        with buf.lock:
            seq = buf.poll_seq
            auto = subs.consumed_offsets(seq).get(A)
            everything = subs.consumed_offsets().get(A)
            seq = buf.poll_seq
        returned_by_then = last[0]
        # + 2: the record taken off the lease may be returned just after the look.
        if everything is not None and everything.offset > returned_by_then + 2:
            ahead.append((everything.offset, returned_by_then))
        if auto is not None:
            commits.append((seq, auto.offset))
    t.join(30)
    assert not t.is_alive()
    assert len(commits) > 100
    assert not [(seq, off) for seq, off in commits if seq in returned and off > returned[seq]]
    assert not ahead
