"""produce_batch(): confluent-kafka's vectorised produce, for both producers.

``produce_batch(topic, messages)`` takes a list of message dicts (confluent-kafka's
``Producer.produce_batch``). The common message -- only ``'value'`` and/or ``'key'``, bytes,
no partition, timestamp or callback -- goes into its topic's :class:`KeyedStage` a stage's
chunk at a time (:func:`stage_run`): the keys, values and send times are added to the
stage's lists by ``list.extend``, under one lock acquisition and one clock read a chunk,
with the buffer.memory check made over the chunk's sizes at once; settling then hashes and
encodes the chunk as it does send()'s. Measured (callgrind, a sync Producer against Tansu,
10-byte keys and 100-byte values, calls of 1,000, 60k less 20k records): the caller's
thread runs 5,900-6,900 instructions a record (two runs; valgrind's slowness moves batch
boundaries) against send()'s 15,016 and produce()'s 11,785, the whole process 9,300-9,500
against 25,931 and 28,591. Most of what is left is the settling all three share (murmur2
in lanes, the run writers) and this module's C passes over the list.

Anything else (a tombstone, an explicit partition or timestamp, a callback, headers, a key
without a value) is produced one message at a time through the producers' own record path
(``_ProducerCore._append``, as produce()), in order: it settles the stage first, so each
partition gets its records in the order the same produce() calls give.

The logic is written once, as a generator (:func:`produce_steps`) that yields what it must
wait for (a topic's metadata, buffer memory, a loop turn for an async producer) and is
driven by two thin shells, :func:`produce_batch_sync` and :func:`produce_batch_async`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Generator, Mapping
from itertools import accumulate, repeat
from operator import add
from time import time as _time
from typing import TYPE_CHECKING, Any

from kontrakt.clients.producer._batch import DeliveryCallback
from kontrakt.clients.producer._core import NEED_METADATA
from kontrakt.clients.producer._future import RecordFuture
from kontrakt.clients.producer._records import RECORD_OVERHEAD
from kontrakt.errors import InvalidMessageError, KontraktError, RecordTooLargeError

if TYPE_CHECKING:
    from kontrakt.clients.producer._core import _ProducerCore
    from kontrakt.clients.producer._producer import AsyncProducer
    from kontrakt.clients.producer._stage import KeyedStage
    from kontrakt.clients.producer._sync import Producer

__all__ = ["produce_batch_async", "produce_batch_sync"]

#: the fields a message may have ('_error': left by an earlier call on a failed message)
_FIELDS = frozenset({"value", "key", "partition", "timestamp", "callback", "headers",
                     "_error"})
#: the fields of a message the bulk path takes
_SIMPLE = frozenset({"value", "key"})
_BYTES_LIKE = (bytes, bytearray, memoryview)
_dict_get = dict.get

#: a run of messages staged in bulk, keyed / without a key; or produced one at a time
KEYED, KEYLESS, SINGLE = 0, 1, 2

#: what the core waits for (yielded to the shell): metadata of the topic, buffer memory
#: (each with the monotonic deadline), or -- async only -- a loop turn
_METADATA, _MEMORY, _TURN = 0, 1, 2
Wait = tuple[int, float]


# --- validation ------------------------------------------------------------------------


def plan(messages: Any, bulk_keyed: bool, bulk_keyless: bool
         ) -> tuple[list[tuple[int, int, int]], list[Any], list[Any]]:
    """Check ``messages`` and cut them into runs: ``(runs, keys, values)``, each run
    ``(start, end, kind)``; ``keys`` and ``values`` the messages' fields (None where absent).

    ``bulk_keyed`` / ``bulk_keyless``: whether keyed / keyless messages may be staged in
    bulk (the producer's partitioner allows it).

    Raises:
        InvalidMessageError: ``messages`` is not a list, or a message is not a dict, has an
            unknown field or a field of the wrong type (nothing is queued then).
    """
    if not isinstance(messages, list):
        raise InvalidMessageError(
            f"messages must be a list of dicts, not {type(messages).__name__}", -1)
    n = len(messages)
    if not n:
        return [], [], []
    # The whole list's checks run in C, five passes for the common lists: dict.get of the
    # values (which refuses a non-dict), the fields counted, the values' types, then the
    # keys and their types. Every value bytes means every message has one: with n fields
    # in all there is no other field, with 2n and every key bytes, only the key.
    # (A union of the fields and a pass over the messages' types cost two passes more.)
    try:
        values = [*map(_dict_get, messages, repeat("value"))]
    except TypeError:
        i = next(i for i, m in enumerate(messages) if not isinstance(m, dict))
        raise InvalidMessageError(
            f"message {i} must be a dict, not {type(messages[i]).__name__}", i) from None
    fields = sum(map(len, messages))
    keys: list[Any] | None = None
    if set(map(type, values)) == {bytes}:
        if fields == n and bulk_keyless:
            return [(0, n, KEYLESS)], [None] * n, values
        if fields == 2 * n:
            keys = [*map(_dict_get, messages, repeat("key"))]
            if bulk_keyed and set(map(type, keys)) == {bytes}:
                return [(0, n, KEYED)], keys, values
    if keys is None:
        keys = [*map(_dict_get, messages, repeat("key"))]
    return _plan_each(messages, keys, values, bulk_keyed, bulk_keyless), keys, values


def _plan_each(messages: list[dict[str, Any]], keys: list[Any], values: list[Any],
               bulk_keyed: bool, bulk_keyless: bool) -> list[tuple[int, int, int]]:
    """:func:`plan` for a list with something unusual: every message checked, and runs of
    bulk-stageable messages found between the others."""
    runs: list[tuple[int, int, int]] = []
    for i, m in enumerate(messages):
        if not m.keys() <= _FIELDS:
            unknown = sorted(m.keys() - _FIELDS, key=str)
            raise InvalidMessageError(
                f"message {i} has unknown field(s) {unknown}; a message's fields are "
                f"{sorted(_FIELDS - {'_error'})}", i)
        value, key = values[i], keys[i]
        if value is not None and not isinstance(value, _BYTES_LIKE):
            raise InvalidMessageError(
                f"message {i}: 'value' must be bytes or None, not {type(value).__name__} "
                "(serialize it first)", i)
        if key is not None and not isinstance(key, _BYTES_LIKE):
            raise InvalidMessageError(
                f"message {i}: 'key' must be bytes or None, not {type(key).__name__} "
                "(serialize it first)", i)
        _check_extras(i, m)
        kind = SINGLE
        if m.keys() <= _SIMPLE and type(value) is bytes:
            if type(key) is bytes and bulk_keyed:
                kind = KEYED
            elif key is None and bulk_keyless:
                kind = KEYLESS
        if runs and runs[-1][2] == kind and kind != SINGLE:
            runs[-1] = (runs[-1][0], i + 1, kind)
        else:
            runs.append((i, i + 1, kind))
    return runs


def _check_extras(i: int, m: dict[str, Any]) -> None:
    """Check message ``i``'s partition, timestamp, callback and headers."""
    partition = m.get("partition")
    if partition is not None and (type(partition) is not int or partition < -1):
        raise InvalidMessageError(
            f"message {i}: 'partition' must be an int >= -1 (-1: any), not {partition!r}", i)
    timestamp = m.get("timestamp")
    if timestamp is not None and (type(timestamp) is not int or timestamp < 0):
        raise InvalidMessageError(
            f"message {i}: 'timestamp' must be milliseconds since the epoch (an int >= 0), "
            f"not {timestamp!r}", i)
    callback = m.get("callback")
    if callback is not None and not callable(callback):
        raise InvalidMessageError(
            f"message {i}: 'callback' must be callable, not {type(callback).__name__}", i)
    headers = m.get("headers")
    if headers is not None:
        pairs: Any = list(headers.items()) if isinstance(headers, Mapping) else headers
        if not isinstance(pairs, (list, tuple)) or not all(
                isinstance(h, (tuple, list)) and len(h) == 2 and type(h[0]) is str
                and (h[1] is None or isinstance(h[1], _BYTES_LIKE)) for h in pairs):
            raise InvalidMessageError(
                f"message {i}: 'headers' must be [(str, bytes or None), ...] or a dict of "
                f"str to bytes or None, not {headers!r}", i)


# --- staging a run of messages -----------------------------------------------------------


def stage_run(stage: KeyedStage, keys: list[Any], values: list[Any], lo: int, hi: int,
              keyless: bool, delivery: DeliveryCallback | None, futures: bool
              ) -> tuple[int, list[RecordFuture] | None]:
    """Stage messages ``lo:hi`` (up to the stage's chunk) into ``stage``, as that many
    :meth:`KeyedStage.offer` calls (``offer_keyless`` if ``keyless``) would, in bulk.

    Returns:
        (how many were staged, from ``lo``; their futures if ``futures``). None staged
        when the stage holds records of the other kind, the first record does not fit a
        stage or the buffer, or the producer closed: the caller produces that record the
        general way (which settles the stage, or waits for memory) and comes back.
    """
    acc = stage.acc
    lock = stage.lock
    if lock is not None:
        lock.acquire()
    try:
        staged = stage.keys
        i = len(staged)
        if i and stage.keyless is not keyless:
            return 0, None
        # The stage settles once it holds more than its limit (as after offer()); an empty
        # stage's limit is set from its first record's size (KeyedStage.started).
        first = len(values[lo]) + RECORD_OVERHEAD + (0 if keyless else len(keys[lo]))
        limit = stage.limit if i else stage.limit_for(first)
        hi = min(hi, lo + max(limit + 1 - i, 1))
        vals = values[lo:hi]
        if keyless:
            ks = None
            sizes = [*map(len, vals)]
        else:
            ks = keys[lo:hi]
            sizes = [*map(add, map(len, ks), map(len, vals))]
        n = hi - lo
        total = sum(sizes) + RECORD_OVERHEAD * n
        over = acc.stage_limit - RECORD_OVERHEAD
        if max(sizes) >= over:
            # A record too large for a stage (or the producer closed: stage_limit is 0):
            # those before it are staged.
            n = next(j for j, s in enumerate(sizes) if s >= over)
            total = sum(sizes[:n]) + RECORD_OVERHEAD * n
        room = acc.buffer_memory - acc.used
        if total > room:
            # As many as the buffer holds; the first that does not fit waits for memory.
            n = min(n, _fitting(sizes, room))
            total = sum(sizes[:n]) + RECORD_OVERHEAD * n
        if not n:
            return 0, None
        if n < len(vals):
            vals = vals[:n]
            if ks is not None:
                ks = ks[:n]
        sent = _time()
        staged.extend(repeat(None, n) if ks is None else ks)
        stage.values.extend(vals)
        stage.stamps.extend(repeat(sent, n))
        acc.used += total
        futs = _futures(stage, i, n, sent) if futures else None
        if delivery is not None:
            stage.chunk.keep_many(i, n, delivery)
        if not i:
            stage.keyless = keyless
            stage.started(first)
        settle = len(staged) > stage.limit
    finally:
        if lock is not None:
            lock.release()
    if settle:
        acc.settle(stage)
    return n, futs


def _fitting(sizes: list[int], room: int) -> int:
    """How many of the records of ``sizes`` (key + value bytes) fit ``room`` bytes."""
    n = 0
    for total in accumulate(sizes):
        n += 1
        if total + RECORD_OVERHEAD * n > room:
            return n - 1
    return n


def _futures(stage: KeyedStage, at: int, n: int, sent: float) -> list[RecordFuture]:
    """Futures of the ``n`` records staged at ``at`` (made as KeyedStage.offer makes one)."""
    chunk = stage.chunk
    futs = []
    for i in range(at, at + n):
        fut = RecordFuture()
        fut._head = chunk
        fut._at = i
        fut._timestamp = sent
        futs.append(fut)
    return futs


# --- the core --------------------------------------------------------------------------


class _Report:
    """An async producer's delivery callback ``cb(err, metadata)`` as a future's done
    callback (the sync producer's run from poll(); see _sync.Producer.poll)."""

    __slots__ = ("cb",)

    def __init__(self, cb: DeliveryCallback) -> None:
        self.cb = cb

    def __call__(self, fut: RecordFuture) -> None:
        self.cb(fut.exception(), fut.metadata())


def produce_steps(core: _ProducerCore, topic: str, messages: list[dict[str, Any]],
                  partition: int | None, on_delivery: DeliveryCallback | None
                  ) -> Generator[Wait, None, int]:
    """produce_batch's logic for both producers: yields what to wait for (``(_METADATA,
    deadline)``, ``(_MEMORY, deadline)``, ``(_TURN, 0)``) and is resumed once it is there
    (or has the wait's error thrown in); returns how many messages were queued.

    A message that cannot be queued gets an ``'_error'`` field, the exception: a record too
    large for ``message.max.bytes`` or ``buffer.memory`` alone; every message from the
    first one that met anything else (the buffer full for ``max.block.ms``, the producer
    closed or failed, no metadata for the topic) on.
    """
    threaded = core._acc.threaded
    runs, keys, values = plan(messages, core._simple_keys and partition is None,
                              core._sticky and partition is None)
    if not runs:
        return 0
    core._check()
    count = 0
    for lo, hi, kind in runs:
        pos = lo
        while pos < hi:
            if kind != SINGLE:
                offer = core._fast_topics.get(topic)
                if offer is not None:
                    stage: KeyedStage = offer.__self__  # type: ignore[attr-defined]
                    n, futs = stage_run(stage, keys, values, pos, hi, kind == KEYLESS,
                                        on_delivery if threaded else None,
                                        on_delivery is not None and not threaded)
                    if n:
                        if futs is not None and not threaded:
                            report = _Report(on_delivery)  # type: ignore[arg-type]
                            for fut in futs:
                                fut.add_done_callback(report)
                        count += n
                        pos += n
                        if core._acc.filled and not threaded:
                            core._acc.filled = False
                            yield _TURN, 0.0
                        continue
            m = messages[pos]
            try:
                yield from _one(core, topic, m, keys[pos], values[pos], partition, on_delivery,
                                threaded)
            except RecordTooLargeError as exc:
                m["_error"] = exc
            except KontraktError as exc:
                for rest in messages[pos:]:
                    rest["_error"] = exc
                return count
            else:
                count += 1
                if "_error" in m:
                    del m["_error"]
            pos += 1
    return count


def _one(core: _ProducerCore, topic: str, m: dict[str, Any], key: Any, value: Any,
         partition: int | None, on_delivery: DeliveryCallback | None, threaded: bool
         ) -> Generator[Wait, None, None]:
    """Produce one message the general way (produce()'s path), waiting as it does."""
    if not m.keys() <= _SIMPLE:
        p = m.get("partition")
        if p is not None and p >= 0:
            partition = p
        timestamp = m.get("timestamp") or None
        headers = m.get("headers")
        delivery = m.get("callback") or on_delivery
    else:
        timestamp = headers = None
        delivery = on_delivery
    if value is not None and type(value) is not bytes:
        value = bytes(value)
    if key is not None and type(key) is not bytes:
        key = bytes(key)
    cb = delivery if threaded else None
    res = core._append(topic, value, key, partition, timestamp, headers, cb)
    deadline = 0.0
    while type(res) is not RecordFuture:
        if not deadline:
            deadline = time.monotonic() + core._settings.max_block
        yield (_METADATA if res is NEED_METADATA else _MEMORY), deadline
        core._check()
        res = core._append(topic, value, key, partition, timestamp, headers, cb)
    if delivery is not None and not threaded:
        res.add_done_callback(_Report(delivery))
    if core._acc.filled and not threaded:
        core._acc.filled = False
        yield _TURN, 0.0


# --- the shells ----------------------------------------------------------------------


def produce_batch_sync(producer: Producer, topic: str, messages: list[dict[str, Any]],
                       partition: int | None, on_delivery: DeliveryCallback | None) -> int:
    """Drive :func:`produce_steps` for a sync Producer (waits block this thread)."""
    producer._ensure_started()
    callers = producer._callers()
    core = producer._async
    steps = produce_steps(core, topic, messages, partition, on_delivery)

    def wait(what: int, deadline: float) -> None:
        if what == _METADATA:
            producer._thread.run(callers.wait_metadata(
                topic, partition, max(deadline - time.monotonic(), 0.0)))
        else:
            callers.wait_memory(deadline)

    return _drive(steps, wait)


def _drive(steps: Generator[Wait, None, int], wait: Callable[[int, float], None]) -> int:
    try:
        what, deadline = next(steps)
        while True:
            try:
                wait(what, deadline)
            except KontraktError as exc:
                what, deadline = steps.throw(exc)
            else:
                what, deadline = steps.send(None)
    except StopIteration as done:
        count: int = done.value
        return count


async def produce_batch_async(producer: AsyncProducer, topic: str,
                              messages: list[dict[str, Any]], partition: int | None,
                              on_delivery: DeliveryCallback | None) -> int:
    """Drive :func:`produce_steps` for an AsyncProducer (waits await on its loop)."""
    import asyncio

    steps = produce_steps(producer, topic, messages, partition, on_delivery)
    try:
        what, deadline = next(steps)
        while True:
            try:
                if what == _TURN:
                    await asyncio.sleep(0)
                elif what == _METADATA:
                    await producer._wait_metadata(topic, partition,
                                                  deadline - time.monotonic())
                else:
                    await producer._wait_memory(deadline - time.monotonic())
            except KontraktError as exc:
                what, deadline = steps.throw(exc)
            else:
                what, deadline = steps.send(None)
    except StopIteration as done:
        count: int = done.value
        return count
