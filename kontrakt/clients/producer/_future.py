"""Record futures: a small handle per sent record onto its batch's outcome.

A :class:`RecordFuture` is (head, index, timestamp[, sizes]): its batch and index there, or
its staged chunk and index there until the chunk settles. Its
:class:`~kontrakt.RecordMetadata` is computed on demand, so sending a record costs no future,
lock or event of its own. It speaks both ``concurrent.futures``' and asyncio's future
protocols.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Generator
from contextvars import copy_context
from typing import Any

from kontrakt._types import RecordMetadata
from kontrakt.clients.producer._batch import (
    UNLISTED,
    Callback,
    ProducerBatch,
    StagedChunk,
    run_callbacks,
)

__all__ = ["RecordFuture", "millis", "new_future"]

_new_tuple = tuple.__new__
_running_loop = asyncio._get_running_loop


class _Cancelled:
    """A cancelled RecordFuture's head: done, and every read of the outcome raises."""

    __slots__ = ("message",)
    done = True

    def __init__(self, message: Any) -> None:
        self.message = message

    def placed(self, at: int) -> Any:
        raise asyncio.CancelledError(*(() if self.message is None else (self.message,)))


class _OnLoop:
    """A done callback that must be run by the loop it was added on (``call_soon``), never
    inline in the producer's completion code: one added with an explicit ``context`` (a
    Task's wake-up: a Task cannot be stepped inside another's step), or added to a sync
    producer's future, which its I/O thread resolves (scheduled thread-safely). ``context``
    is the one it was added with, or the one it was added in."""

    __slots__ = ("context", "fn", "loop", "threadsafe")

    def __init__(self, fn: Callable[..., Any], loop: asyncio.AbstractEventLoop,
                 context: Any, threadsafe: bool) -> None:
        self.fn = fn
        self.loop = loop
        self.context = context
        self.threadsafe = threadsafe

    def __call__(self, fut: RecordFuture) -> None:
        schedule = self.loop.call_soon_threadsafe if self.threadsafe else self.loop.call_soon
        try:
            schedule(self.fn, fut, context=self.context)
        except RuntimeError:  # the loop was closed meanwhile: nobody waits any more
            pass


class RecordFuture:
    """The future of one sent record: resolves to its :class:`~kontrakt.RecordMetadata`.

    Awaitable (async producers) and blocking via :meth:`result` (sync producers), with the
    ``concurrent.futures.Future`` methods ``done``, ``result``, ``exception``,
    ``add_done_callback``, ``cancel`` and ``cancelled``. It also speaks asyncio's future
    protocol (``asyncio.isfuture`` is true; ``get_loop``, ``remove_done_callback``), so
    ``asyncio.gather``, ``wait``, ``as_completed``, ``wait_for`` and ``shield`` take the
    futures as they are, without a Task per record. Resolved exactly once, including when
    the producer closes.

    Cancelling: a record cannot be taken back once sent. :meth:`cancel` on an async
    producer's pending future stops *this future's* waiting (it reports cancelled, and
    ``await`` raises ``CancelledError``, as asyncio's ``wait_for`` expects of a timed-out
    future); the record is still delivered and ``flush()`` still waits for it. A sync
    producer's futures are never cancelled (``cancel()`` returns False), as
    ``concurrent.futures`` futures that are running.
    """

    #: asyncio.isfuture() looks for this class attribute; the protocol's other half
    #: (``yield self`` from ``__await__``) is not used, so it is never set per instance.
    _asyncio_future_blocking = False

    # One is made per record, so it is made the cheapest way Python has: a slots class
    # without __init__, its slots set by the maker (new_future, or inlined on the send
    # fast paths). A tuple subclass costs ~45 ns more to make, a __init__ ~60 ns more.
    # _head: the record's batch, or its StagedChunk until the chunk settles; _at: its index
    # in the batch, or in the chunk; _timestamp: its timestamp, in milliseconds (an int),
    # or a staged record's time.time() (a float, see KeyedStage.stamps). _ksize / _vsize:
    # the key's and value's lengths (-1: None), set only when _head is a batch; a staged
    # record's are in its chunk's ``sizes``, so the staged send paths set nothing more.
    __slots__ = ("_at", "_head", "_ksize", "_timestamp", "_vsize")

    _head: Any  # ProducerBatch | StagedChunk, told apart by type() on the hot paths
    _at: int
    _timestamp: int | float
    _ksize: int
    _vsize: int

    def _sizes(self) -> tuple[int, int]:
        """(serialized key size, serialized value size); -1 for None."""
        head = self._head
        if type(head) is ProducerBatch:
            return self._ksize, self._vsize
        sizes = head.sizes
        if sizes is None:  # not settled yet
            head.placed(self._at)
            sizes = head.sizes
        return sizes[0][self._at], sizes[1][self._at]

    @property
    def _batch(self) -> ProducerBatch:
        b = self._head
        if type(b) is ProducerBatch:
            return b
        batch: ProducerBatch
        if type(b) is not StagedChunk or b.stage.acc.threaded:
            # Cancelled (placed() raises CancelledError), or a sync producer's record: its
            # I/O thread reads (_head, _at) as a pair, so its futures keep pointing at
            # their chunk.
            batch = b.placed(self._at)[0]
            return batch
        # An async producer's future is only read on its loop's thread: keep where the
        # record was placed, so that later reads (gather reads each future 3-4 times)
        # skip the chunk's lookup. A batch-headed future carries its sizes itself (see
        # __slots__): taken from the chunk here.
        at = self._at
        batches = b.batches
        if batches is None or batches is UNLISTED:
            batch, index = b.placed(at)  # settles the stage, or lists its placements
        else:  # placed()'s lookup without its call (once per record gathered)
            batch = batches[at]
            index = b.indexes[at]  # type: ignore[index]  # listed with batches
        sizes = b.sizes
        assert sizes is not None  # settled
        self._ksize = sizes[0][at]
        self._vsize = sizes[1][at]
        self._head = batch
        self._at = index
        return batch

    @property
    def _index(self) -> int:
        b = self._head
        index: int = self._at if type(b) is ProducerBatch else b.placed(self._at)[1]
        return index

    def __repr__(self) -> str:
        head = self._head
        if type(head) is _Cancelled:
            return "<RecordFuture cancelled>"
        if type(head) is StagedChunk and head.batches is None:
            return f"<RecordFuture {head.stage.topic} pending>"
        b = self._batch
        error = self.exception() if b.done else None
        state = ("pending" if not b.done else
                 f"failed: {error!r}" if error else f"offset {self.metadata().offset}")
        return f"<RecordFuture {b.topic}-{b.partition} {state}>"

    def done(self) -> bool:
        """True once the record was acknowledged or failed."""
        head = self._head
        if type(head) is StagedChunk:
            if head.batches is None:
                return False
            return self._batch.done
        return head.done  # type: ignore[no-any-return]

    def cancelled(self) -> bool:
        """True when :meth:`cancel` stopped this future's waiting."""
        return type(self._head) is _Cancelled

    def cancel(self, msg: Any = None) -> bool:
        """Stop waiting on this future (async producers; see the class docs).

        The record is not taken back: it is delivered (or fails) as if nothing happened,
        and ``flush()`` waits for it. Callbacks added to this future run now (on the loop),
        seeing it cancelled.

        Returns:
            True when the future was pending and belongs to an async producer; False when
            it is resolved or belongs to a sync producer.
        """
        head = self._head
        if type(head) is _Cancelled:
            return False
        acc = head.stage.acc if type(head) is StagedChunk else head.acc
        if acc.threaded:
            return False
        # An async producer's accumulator is only touched on its loop's thread: nothing
        # resolves or settles between these lines.
        if self.done():
            return False
        holder = head if type(head) is StagedChunk and head.batches is None else self._batch
        with acc.lock:
            mine = _take_callbacks(holder, self, None)
        self._head = _Cancelled(msg)
        run_callbacks(mine)
        return True

    @property
    def _cancel_message(self) -> Any:
        """The message :meth:`cancel` was given (asyncio's future protocol: gather with
        ``return_exceptions=True`` reads it of a cancelled child); None when not
        cancelled."""
        head = self._head
        return head.message if type(head) is _Cancelled else None

    def _make_cancelled_error(self) -> asyncio.CancelledError:
        # asyncio.gather asks a cancelled child for its error this way.
        message = self._cancel_message
        return asyncio.CancelledError(*(() if message is None else (message,)))

    #: ``get_loop()``: the running event loop (asyncio's future protocol; RuntimeError when
    #: no loop runs in this thread). A record future belongs to no loop of its own:
    #: asyncio's functions ask for one only while running on a loop, which is where its
    #: callbacks are then run. The C function itself, not a method calling it: gather
    #: and wait ask each future for its loop (a Python frame each).
    get_loop = staticmethod(asyncio.get_running_loop)

    def metadata(self) -> RecordMetadata:
        """Where the record landed (offset -1 with acks=0); only valid when done without
        error."""
        b = self._head
        if type(b) is ProducerBatch:
            index = self._at
        else:
            b, index = b.placed(self._at)
        if b.base_offset < 0 and b.split is not None:
            b, index = b.part(index)
        offset = b.base_offset + index if b.base_offset >= 0 else -1
        ts = b.log_append_time if b.log_append_time >= 0 else millis(self._timestamp)
        return _new_tuple(RecordMetadata, (b.topic, b.partition, offset, ts, *self._sizes()))

    # result() and exception() first try a resolved record whose future points at its
    # batch (every record's once asyncio looked at it: see _batch): gather calls
    # exception() twice and result() once per future, and the property, metadata(),
    # _sizes() and millis() calls cost a Python frame each.
    def result(self, timeout: float | None = None) -> RecordMetadata:
        """The record's metadata, blocking (sync producers) until it is resolved.

        Args:
            timeout: seconds to wait; None waits until delivery succeeds or fails
                (bounded by ``delivery.timeout.ms``).

        Raises:
            ProduceError / RecordTooLargeError / DeliveryTimeoutError: delivery failed
                (DeliveryTimeoutError: ``delivery.timeout.ms`` ran out; it is also a
                KafkaTimeoutError and a ProduceError).
            KafkaTimeoutError: not resolved within ``timeout``.
            IllegalStateError: called unresolved on an async producer's loop.
            CancelledError: the future was cancelled.
        """
        b = self._head
        if type(b) is ProducerBatch and b.done and b.error is None and b.base_offset >= 0:
            ts: int | float = b.log_append_time
            if ts < 0:
                ts = self._timestamp
                if type(ts) is float:
                    ts = int(ts * 1000)
            return _new_tuple(RecordMetadata, (b.topic, b.partition, b.base_offset + self._at,
                                               ts, self._ksize, self._vsize))
        if type(b) is StagedChunk:
            # A staged record whose chunk's placements are listed (by the first such read
            # of the chunk): read off the chunk, without the calls below (kafka-python's
            # idiom reads every future after flush()). ``batches`` before ``indexes``: a
            # sync producer's I/O thread lists them in the other order.
            batches = b.batches
            if batches is not None and batches is not UNLISTED:
                at = self._at
                batch = batches[at]
                if batch.done and batch.error is None and batch.base_offset >= 0:
                    sizes = b.sizes
                    assert sizes is not None and b.indexes is not None
                    ts = batch.log_append_time
                    if ts < 0:
                        ts = int(self._timestamp * 1000)
                    return _new_tuple(RecordMetadata, (
                        batch.topic, batch.partition, batch.base_offset + b.indexes[at], ts,
                        sizes[0][at], sizes[1][at]))
        b = self._batch
        if not b.done:
            b.wait(timeout)
        if b.error is not None:
            if b.split is None:
                raise b.error
            self._raise_part_error()
        return self.metadata()

    def get(self, timeout: float | None = None) -> RecordMetadata:
        """kafka-python's name for :meth:`result` (``producer.send(...).get(timeout=10)``)."""
        return self.result(timeout)

    def exception(self, timeout: float | None = None) -> BaseException | None:
        """The delivery error, or None on success; waits like :meth:`result` (and raises
        CancelledError when the future was cancelled)."""
        b = self._head
        if type(b) is not ProducerBatch:
            b = self._batch
        if not b.done:
            b.wait(timeout)
        error = b.error
        if error is not None and b.split is not None:
            return self._part().error
        return error

    def _part(self) -> ProducerBatch:
        """The batch whose outcome is the record's (see ProducerBatch.part)."""
        head = self._head
        b, index = (head, self._at) if type(head) is ProducerBatch else head.placed(self._at)
        return b.part(index)[0]

    def _raise_part_error(self) -> None:
        """Raise the error of the record's part of a split batch, if its part failed."""
        error = self._part().error
        if error is not None:
            raise error

    # ``context`` is not keyword-only (asyncio's is): CPython 3.11 does not specialize
    # calls of a function with keyword-only parameters, and the generic call looks its
    # keyword defaults up in a dict each time. With the loop lookup this method then did
    # for every callback, that was the done-callbacks idiom's regression: +1,195
    # instructions a record under callgrind (benchmarks/record_path.py, the commit that
    # added ``context`` against its parent). asyncio passes ``context`` by keyword, which
    # works either way.
    def add_done_callback(self, fn: Callable[[RecordFuture], Any],
                          context: Any = None) -> None:
        """Call ``fn(self)`` once the record is resolved (at once if it already is, or, when
        added on a running event loop, on that loop's next turn, as asyncio's futures do).

        An async producer's callbacks run on its event loop thread when their batch
        completes, in the order they were added (send order per partition); they must not
        block. Each runs in ``context`` if given, else in (a copy of) the context it was
        added in, as asyncio's futures run theirs; one that raises is reported to the
        running loop's exception handler, and the others still run. Added from a
        coroutine to a sync producer's future (its I/O thread resolves it), or with a
        ``context`` (asyncio's Tasks), they are run by the loop they were added on
        (``call_soon``). Added to a sync producer's future with no loop running
        (``concurrent.futures`` style), they run on its I/O thread as they are. A sync
        producer's ``produce(on_delivery=...)`` instead runs its callbacks on the caller's
        thread in ``poll()``/``flush()``.
        """
        head = self._head
        kind = type(head)
        if kind is ProducerBatch:
            acc = head.acc
        elif kind is StagedChunk:
            acc = head.stage.acc
        else:  # cancelled
            loop = _running_loop()
            if loop is not None:
                loop.call_soon(fn, self, context=context)
            else:
                run_callbacks([(fn, self, context)])
            return
        threaded = acc.threaded
        entry: Callback
        if context is None and not threaded:
            # asyncio's futures run a callback in the context it was added in: a copy of
            # it (O(1), ~50 ns) kept with the callback, and entered (~60 ns) to run it.
            entry = (fn, self, copy_context())
            if kind is StagedChunk:
                # An async producer's record: only touched on its loop's thread, no lock.
                if head.batches is None:
                    # Kept with the chunk until it settles: adding a callback to each
                    # record as it is sent must not settle the stage record by record.
                    kept = head.callbacks
                    if kept is None:
                        head.callbacks = [entry]
                    else:
                        kept.append(entry)
                    return
                head = self._batch
            if not head.done:  # _keep inlined, as above: a frame less per record
                kept = head.callbacks
                if kept is None:
                    head.callbacks = [entry]
                else:
                    kept.append(entry)
                return
            loop = _running_loop()
        else:
            loop = _running_loop()
            if loop is not None:
                entry = (_OnLoop(fn, loop, copy_context() if context is None else context,
                                 threaded), self, None)
            else:
                entry = (fn, self, context)
            with acc.lock:
                if kind is StagedChunk and head.batches is None:
                    _keep(head, entry)
                    return
            b = self._batch
            with acc.lock:
                if not b.done:
                    _keep(b, entry)
                    return
        if loop is not None and entry[2] is not None:
            # Resolved already, and added on a loop: run by the loop, as asyncio's futures
            # do (asyncio's as_completed and wait add callbacks while iterating their sets).
            _run_soon(loop, entry)
            return
        run_callbacks([entry])

    def remove_done_callback(self, fn: Callable[[RecordFuture], Any]) -> int:
        """Forget the callbacks ``fn`` that were added and have not run (asyncio's future
        protocol: ``wait`` and ``as_completed`` call it when they time out, ``wait`` also
        when it returns). Callbacks equal to ``fn`` are removed, as asyncio's futures do
        (a bound method is a new object each time it is looked up).

        Returns:
            How many were removed.
        """
        head = self._head
        if type(head) is ProducerBatch:
            if head.done:  # its callbacks ran (or are running) already
                return 0
        elif type(head) is _Cancelled:
            return 0
        elif head.batches is None:
            with head.stage.acc.lock:
                if head.batches is None:
                    return len(_take_callbacks(head, self, fn))
        # Settled (maybe just now, its hooks moved on to the record's batch).
        b = self._batch
        with b.acc.lock:
            return 0 if b.done else len(_take_callbacks(b, self, fn))

    def __await__(self) -> Generator[Any, None, RecordMetadata]:
        b = self._batch
        if not b.done:
            yield from b.wait_async().__await__()
        return self.result()  # resolved: its fast path, or the error


class _Soon(threading.local):
    """Callbacks of resolved futures added on this thread's running loop, run together on
    its next turn: one ``call_soon`` a turn, not one a callback (gathering 200k futures adds
    most of their callbacks after their records were acknowledged)."""

    pending: list[Callback] | None = None
    #: the loop ``pending`` will run on (a list left by a loop that closed first is not
    #: added to)
    loop: asyncio.AbstractEventLoop | None = None


_soon = _Soon()


def _run_soon(loop: asyncio.AbstractEventLoop, entry: Callback) -> None:
    pending = _soon.pending
    if pending is None or _soon.loop is not loop:
        pending = _soon.pending = []
        _soon.loop = loop
        loop.call_soon(_run_pending, pending)
    pending.append(entry)


def _run_pending(pending: list[Callback]) -> None:
    if _soon.pending is pending:
        _soon.pending = None
    run_callbacks(pending)


def _keep(holder: ProducerBatch | StagedChunk, entry: Callback) -> None:
    """Keep a done callback with its record's batch or staged chunk."""
    kept = holder.callbacks
    if kept is None:
        holder.callbacks = [entry]
    else:
        kept.append(entry)


def _take_callbacks(holder: ProducerBatch | StagedChunk, fut: RecordFuture,
                    fn: Callable[..., Any] | None) -> list[Callback]:
    """Take ``fut``'s done callbacks (those equal to ``fn``, or all when None) out of
    ``holder`` and return them; the caller holds the accumulator's lock."""
    kept = holder.callbacks
    if not kept:
        return []
    taken: list[Callback] = []
    rest = []
    for entry in kept:
        cb, owner, _ = entry
        if owner is fut and (fn is None or cb == fn or (type(cb) is _OnLoop and cb.fn == fn)):
            taken.append(entry)
        else:
            rest.append(entry)
    holder.callbacks = rest or None
    return taken


def new_future(head: ProducerBatch | StagedChunk, at: int, timestamp: int | float,
               ksize: int = -1, vsize: int = -1) -> RecordFuture:
    """A record's future: index ``at`` of batch (or staged chunk) ``head``; ``ksize`` /
    ``vsize`` its key's and value's lengths (-1: None or not known)."""
    fut = RecordFuture()
    fut._head = head
    fut._at = at
    fut._timestamp = timestamp
    fut._ksize = ksize
    fut._vsize = vsize
    return fut


def millis(timestamp: int | float) -> int:
    """A RecordFuture's ``_timestamp`` in milliseconds."""
    return int(timestamp * 1000) if type(timestamp) is float else int(timestamp)

