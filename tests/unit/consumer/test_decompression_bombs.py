"""Decompression bombs in Fetch responses: the consumer refuses them within bounded memory.

Neither test broker can serve a batch crafted to inflate past its size (both recompress or
check what producers send), so the bombs come from :class:`FakeBroker`, the crafted Fetch
peer, which serves per-partition logs built here: good compressed batches of text, then a
bomb (a valid batch, CRC and all, whose payload inflates to one record of 32-128 MiB of
zeros, in every framing of ``tests/unit/bombs.py``), then more good batches. The consumer
runs in a child process (``bomb_child.py``) so that its peak RSS is its own.

The consumer's limit is ``max.partition.fetch.bytes`` (64 KiB here) x
``max.decompressed.batch.multiple`` (default 64) = 4 MiB per batch. Stated bound: the peak
RSS over all bomb partitions rises less than 6 x that (24 MiB) above the warmed-up consumer;
a consumer without the limit takes at least 3 x the bomb (its output, the copy, the record).
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from kontrakt.clients.consumer import AsyncConsumer
from kontrakt.errors import ConfigError, CorruptRecordError, DecompressionLimitError
from kontrakt.protocol.records import CompressionType, RecordBatchBuilder
from kontrakt.protocol.records._builder import frame_batch
from tests._crafted_broker import FakeBroker
from tests.unit import bombs
from tests.unit.test_records_decompression_limits import _text

ROOT = Path(__file__).resolve().parents[3]
PARTITION_FETCH = 64 * 1024
LIMIT = 64 * PARTITION_FETCH  # the default multiple
BOUND = 6 * LIMIT
PER_BATCH = 20
CASES_PER_CODEC = 3


def _good(codec: str, base: int, n: int, seed: int) -> bytes:
    b = RecordBatchBuilder(base_offset=base, compression=codec)
    text = _text(n, seed)
    for i, line in enumerate(text.split(b"}")[:n]):
        b.append(1_700_000_000_000 + base + i, f"k{base + i}".encode(), line + b"}")
    return b.build()


def _bomb(codec: str, variant: str, size: int, offset: int) -> bytes:
    payload = bombs.build(codec, variant, size, bombs.record_prefix(size))
    return frame_batch(payload, 1, 1_700_000_000_000, 1_700_000_000_000,
                       codec=CompressionType(bombs.CODEC_IDS[codec]), compressed=True,
                       base_offset=offset)


def _partition(codec: str, case: dict[str, Any], seed: int) -> tuple[bytes, int, int]:
    """(log, bomb offset, end offset) for a bomb ``case`` of :func:`bombs.sample`."""
    blobs = [_good(codec, i * PER_BATCH, PER_BATCH, seed + i) for i in range(case["before"])]
    bomb = case["before"] * PER_BATCH
    blobs.append(_bomb(codec, case["variant"], case["size"], bomb))
    blobs += [_good(codec, bomb + 1 + i * PER_BATCH, PER_BATCH, seed - i)
              for i in range(case["after"])]
    return b"".join(blobs), bomb, bomb + 1 + case["after"] * PER_BATCH


def _warm_up(codec: str) -> tuple[bytes, int]:
    """Good batches, the last of them ~3.5 MiB of JSON text: a large normal batch, which
    the default limit lets through."""
    big = RecordBatchBuilder(base_offset=3 * PER_BATCH, compression=codec, max_batch_size=LIMIT)
    text = _text(36_000, 9)
    records = text.split(b"}")[:36_000]
    for i, line in enumerate(records):
        assert big.append(1_700_000_000_000 + i, None, line + b"}") is not None
    assert 3 << 20 < sum(len(r) + 1 for r in records) < LIMIT
    log = b"".join([*(_good(codec, i * PER_BATCH, PER_BATCH, i) for i in range(3)),
                    big.build()])
    return log, 3 * PER_BATCH + len(records)


@pytest.mark.skipif(not Path("/proc/self/clear_refs").exists(), reason="Linux /proc")
@pytest.mark.parametrize("codec", ["gzip", "zstd", "lz4", "snappy"])
def test_bombs_are_refused_in_bounded_memory_and_nothing_before_them_is_lost(
        codec: str, tmp_path: Path) -> None:
    rng = random.Random(f"bombs-{codec}")
    cases = [bombs.sample(rng, codec) for _ in range(CASES_PER_CODEC)]
    warm, warm_end = _warm_up(codec)
    (tmp_path / "p0").write_bytes(warm)
    partitions: list[dict[str, Any]] = [{"path": str(tmp_path / "p0"), "bomb_offset": None}]
    expected = []
    for i, case in enumerate(cases, start=1):
        log, bomb, end = _partition(codec, case, 100 * i)
        (tmp_path / f"p{i}").write_bytes(log)
        partitions.append({"path": str(tmp_path / f"p{i}"), "bomb_offset": bomb})
        expected.append((case, bomb, end))
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps({"max_partition_fetch_bytes": PARTITION_FETCH,
                                "partitions": partitions}))
    proc = subprocess.run(
        [sys.executable, "-m", "tests.unit.consumer.bomb_child", str(spec)],
        capture_output=True, text=True, timeout=240, cwd=ROOT, check=False,
        env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads(proc.stdout)
    assert report["warm_up"] == {"records": warm_end, "error": None}
    assert report["rss_growth"] < BOUND, (report["rss_growth"], cases)
    for i, ((case, bomb, end), got) in enumerate(zip(expected, report["cases"], strict=True),
                                                 start=1):
        # Every record of the good batches before the bomb, then the error naming it.
        assert got["before"] == list(range(bomb)), case
        assert got["error"] is not None, (case, "the bomb was not refused")
        err = got["error"]
        assert err["where"] == ["bombs", i, bomb], case
        if "lying" not in case["variant"]:
            assert err["type"] == "DecompressionLimitError" and err["limit"] == LIMIT, case
        # Fetching stopped on it: raised again, position on it, until a seek past it.
        assert got["position"] == bomb and got["raised_again"], case
        assert got["after"] == list(range(bomb + 1, end)), case
        assert got["after_error"] is None, case


def _run_in_process(log: bytes, **config: Any) -> tuple[list[int], Any, int | None, Any]:
    """Consume ``log`` (one partition) from 0 in this process: (offsets handed out before
    the error, the error, the position then, the error of the next getmany)."""
    from kontrakt._types import TopicPartition
    from kontrakt.protocol.records import iter_batches
    from tests.unit.consumer.bomb_child import TOPIC, _consume, _serve

    logs = [[(b.next_offset, b.raw()) for b in iter_batches(log, check_crcs=False)]]
    tp = TopicPartition(TOPIC, 0)

    async def main() -> tuple[list[int], Any, int | None, Any]:
        async with FakeBroker({TOPIC: 1}, {1: _serve(logs)}) as broker:  # noqa: SIM117
            async with AsyncConsumer(bootstrap_servers=broker.bootstrap, fetch_max_wait_ms=50,
                                     **config) as c:
                c.assign([tp])
                c.seek(tp, 0)
                got, err = await _consume(c, tp, logs[0][-1][0])
                st = c._subs.state(tp)
                position = st.position.offset if st.position else None
                again = (await _consume(c, tp, logs[0][-1][0]))[1] if err else None
                return got, err, position, again

    return asyncio.run(main())


def test_the_limit_follows_the_configured_multiple() -> None:
    # 64 KiB x 2 = 128 KiB: a normal 300 KiB batch of text is refused, named, with the limit.
    log = b"".join([_good("zstd", 0, PER_BATCH, 1), _good("zstd", PER_BATCH, 3000, 2),
                    _good("zstd", PER_BATCH + 3000, PER_BATCH, 3)])
    got, err, position, again = _run_in_process(
        log, max_partition_fetch_bytes=PARTITION_FETCH, max_decompressed_batch_multiple=2)
    assert got == list(range(PER_BATCH))
    assert isinstance(err, DecompressionLimitError)
    assert (err.topic, err.partition, err.offset, err.limit) == ("bombs", 0, PER_BATCH,
                                                                 2 * PARTITION_FETCH)
    assert position == PER_BATCH and isinstance(again, DecompressionLimitError)
    # The default multiple lets it through.
    got, err, _, _ = _run_in_process(log, max_partition_fetch_bytes=PARTITION_FETCH)
    assert err is None and got == list(range(2 * PER_BATCH + 3000))
    with pytest.raises(ConfigError):
        AsyncConsumer(max_decompressed_batch_multiple=0)


def test_a_corrupt_batch_stops_its_partition_after_the_records_before_it() -> None:
    """Any corrupt batch (here a CRC mismatch) in the same chunk as good ones: the good
    records are handed out, then the error, raised until a seek; the position stays on it."""
    bad = bytearray(_good("gzip", 2 * PER_BATCH, PER_BATCH, 5))
    bad[-3] ^= 0xFF
    log = b"".join([_good("gzip", 0, PER_BATCH, 1), _good("gzip", PER_BATCH, PER_BATCH, 2),
                    bytes(bad), _good("gzip", 3 * PER_BATCH, PER_BATCH, 3)])
    got, err, position, again = _run_in_process(log)
    assert got == list(range(2 * PER_BATCH))
    assert isinstance(err, CorruptRecordError) and "CRC" in str(err)
    assert (err.topic, err.partition, err.offset) == ("bombs", 0, 2 * PER_BATCH)
    assert position == 2 * PER_BATCH and isinstance(again, CorruptRecordError)


def test_per_record_polls_get_the_records_before_a_corrupt_batch_then_its_error() -> None:
    """The buffer side, as a sync consumer's poll() drains it (drain_one): the error waits
    for the records of its partition queued before it, then is raised on every drain (as
    the Java client, whose poll keeps failing until the application seeks past the bad
    batch), and a seek drops it."""
    from kontrakt._types import TopicPartition
    from kontrakt.clients.consumer._fetcher import CompletedFetch, FetchBuffer, parse_partition
    from kontrakt.clients.consumer._subscription import SubscriptionState

    tp0, tp1 = TopicPartition("t", 0), TopicPartition("t", 1)
    subs = SubscriptionState()
    subs.assign([tp0, tp1])
    buf = FetchBuffer(1 << 20)
    for tp in (tp0, tp1):
        subs.seek(tp, 0)
        st = subs.state(tp)
        recs, nxt, _ = parse_partition("t", tp.partition, _good("lz4", 0, 3, 1), 0,
                                       read_committed=False, aborted=None, check_crcs=True)
        buf.add(CompletedFetch(tp, st, st.gen, recs, nxt, 0, 100))
    err = DecompressionLimitError("too big", limit=1, topic="t", partition=0, offset=3)
    buf.add_error(tp0, subs.state(tp0), err, after_records=True)
    got = []
    for _ in range(3):
        rec = buf.drain_one()
        assert rec is not None
        got.append((rec.partition, rec.offset))
    assert got == [(0, 0), (0, 1), (0, 2)]
    assert subs.state(tp0).position is not None and subs.state(tp0).position.offset == 3
    for _ in range(2):
        with pytest.raises(DecompressionLimitError):
            buf.drain_one()
        with pytest.raises(DecompressionLimitError):
            buf.drain(10)
    subs.seek(tp0, 4)
    assert [r.offset for r in buf.drain(10)[tp1]] == [0, 1, 2]
    assert buf.drain_one() is None
