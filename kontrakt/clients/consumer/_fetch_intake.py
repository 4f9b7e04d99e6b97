"""Decoding a fetched partition into the :class:`FetchBuffer`, under the prefetch cap.

Memory: buffered records count against the cap (``queued.max.messages.kbytes``) by what
they cost decoded (:data:`~kontrakt.clients.consumer._decoding.RECORD_COST`), not by their
compressed bytes, and a response is decoded a bounded chunk at a time only while the buffer
is below the cap; a decoding over it waits for the application to drain
(:meth:`BufferIntake._decode_partition`). So a batch of millions of tiny records, or a
response of many batches each at the decompression limit, takes the cap and a chunk or two,
not what it decodes to.

The :class:`~kontrakt.clients.consumer._fetcher.Fetcher` inherits these methods from
:class:`BufferIntake` and sizes its chunks with the bounds declared here.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Generator
from typing import Any

from kontrakt._types import TopicPartition
from kontrakt.clients.consumer._buffer import CompletedFetch, FetchBuffer
from kontrakt.clients.consumer._metrics import ConsumerMetrics
from kontrakt.clients.consumer._subscription import PartitionState
from kontrakt.errors import CorruptRecordError

__all__ = ["CHUNK_BYTES", "LOOP_READ", "MAX_CHUNK_COST", "MIN_CHUNK_COST", "BufferIntake"]

log = logging.getLogger("kontrakt.consumer.fetcher")

#: Decoded records are handed to the buffer after about this many bytes of batches, and the
#: loop then runs once per LOOP_READ bytes decoded: asyncio reads up to 256 KiB per socket
#: per loop pass, so the broker keeps streaming the next response while this one is decoded
#: (without the passes, its sending stalls once the socket buffers are full, until the whole
#: response is decoded). Chunks are not smaller because the garbage collector is paused per
#: chunk: every chunk costs a young-generation pass, and every tenth an older one.
CHUNK_BYTES = 512 * 1024
LOOP_READ = 128 * 1024
#: Records are materialized at most about this much memory at a time (see
#: Fetcher.chunk_cost): an eighth of the prefetch cap, within these bounds.
MIN_CHUNK_COST = 64 * 1024
MAX_CHUNK_COST = 8 * 1024 * 1024


class BufferIntake:
    """The :class:`~kontrakt.clients.consumer._fetcher.Fetcher`'s decoding into the buffer
    (a mixin: the fetcher sets the attributes declared here)."""

    _chunks: Callable[..., Generator[tuple[list[Any], int, int, int, int], None, None]]
    buffer: FetchBuffer
    read_committed: bool
    check_crcs: bool
    max_batch_bytes: int
    chunk_bytes: int
    chunk_cost: int
    metrics: ConsumerMetrics
    _space: asyncio.Event | None

    async def _decode_partition(self, tp: TopicPartition, st: PartitionState, gen: int,
                                offset: int, pd: Any) -> None:
        """Decode a partition's records into the buffer, a chunk at a time.

        Between chunks the loop runs (sockets are read, so the broker keeps streaming the
        next response, and an async application can take the records already buffered).
        Stops when the partition is sought or reassigned meanwhile, or has failed.

        A corrupt batch (bad CRC, malformed, or decompressing past ``max_batch_bytes``)
        stops fetching the partition, as in the Java client: its error is raised once the
        records before it are consumed, and the position stays on it (a commit cannot skip
        it) until the application seeks.
        """
        if st.failed:
            return  # a batch before this response was corrupt
        buffer = self.buffer
        chunks = self._chunks(
            tp.topic, tp.partition, pd.records, offset, read_committed=self.read_committed,
            aborted=pd.aborted_transactions, check_crcs=self.check_crcs,
            chunk_bytes=self.chunk_bytes, max_batch_bytes=self.max_batch_bytes,
            chunk_cost=self.chunk_cost)
        done = offset
        try:
            while True:
                if buffer.total_bytes >= buffer.max_bytes:
                    # The next chunk is decoded only once the application has made room: a
                    # response (or batch) of any size then costs at most the cap plus a
                    # chunk. The chain of decodings behind this one waits too.
                    await self._wait_for_space(st, gen)
                    if st.gen != gen:
                        return
                    if st.paused and buffer.full(st):
                        # Paused with the buffer full: the rest of the response is fetched
                        # again once resumed (the pipelined fetch past it is now stale, and
                        # so is a response to it already received: see refetch), rather
                        # than hold the other partitions' records behind it.
                        st.fetch_offset = done
                        st.refetch += 1
                        return
                item = next(chunks, None)
                if item is None:
                    break
                records, next_offset, epoch, size, cost = item
                if st.gen != gen:
                    return
                done = next_offset
                st.fetch_offset = max(st.fetch_offset, next_offset)
                if epoch >= 0:
                    st.last_fetched_epoch = epoch
                buffer.add(CompletedFetch(tp, st, gen, records, next_offset, epoch, size, cost))
                self.metrics.partition_received(tp, len(records), size)
                for _ in range(max(1, size // LOOP_READ)):
                    await asyncio.sleep(0)
        except CorruptRecordError as exc:
            if st.gen != gen:
                return
            log.error("fetch %s: %s", tp, exc)
            # The next fetch went out past this batch (pipelining); moving fetch_offset
            # back makes its response stale, and failed stops further fetches.
            st.fetch_offset = done
            st.failed = True
            buffer.add_error(tp, st, exc, after_records=True)
        finally:
            chunks.close()

    async def _wait_for_space(self, st: PartitionState, gen: int) -> None:
        """Wait until the buffer has room for ``st``'s records (:meth:`FetchBuffer.full`),
        or ``st`` is sought or unassigned.

        Draining frees space and calls wake() (``buffer.on_space``), as do seeks,
        assignment changes, pause() and resume(); close() cancels the waiting task. Returns
        at once for a paused partition (its decoding stops).
        """
        space = self._space
        assert space is not None
        buffer = self.buffer
        while buffer.full(st) and st.gen == gen and not st.paused:
            space.clear()
            await space.wait()
