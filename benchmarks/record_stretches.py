"""The consumer's decoding of records of varying sizes (stretches, ``_decode_varying``)
and of one size (runs), counted in instructions: ``iter_partition_chunks`` (CRC checked,
chunks of 512 KiB, records freed) over 50,000 records in batches of 2,000, ``N`` times.
The batches are built once with ``RecordBatchBuilder`` into ``--dir`` and read from there.

    PYTHONHASHSEED=0 valgrind --tool=callgrind --dump-instr=no \\
        --callgrind-out-file=/tmp/cg.vary.1 .venv/bin/python benchmarks/record_stretches.py vary 1

and the same with ``N`` = 2; (total of 2 less total of 1) / 50,000 is a record's cost.

Cases: ``vary`` values of 50-150 B, no key; ``nulls`` the same, 10% null values;
``keyed`` keys of 5-15 B; ``wide`` values of 20-300 B; ``run`` 100 B values (runs, not
stretches); ``hdrs`` a header on every 50th record. Timestamps step 1 ms every 7 records.

Run:  .venv/bin/python benchmarks/record_stretches.py CASE N [--dir DIR]
"""

from __future__ import annotations

import argparse
import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from kontrakt.clients.consumer._fetcher import iter_partition_chunks
from kontrakt.protocol.records import RecordBatchBuilder

RECORDS = 50_000
BATCH = 2_000
CASES = ("vary", "nulls", "keyed", "wide", "run", "hdrs")


def make(case: str) -> bytes:
    """The case's record set: 25 batches of 2,000 records, offsets from 0."""
    rnd = random.Random(23)
    out = []
    base = 1_700_000_000_000
    for first in range(0, RECORDS, BATCH):
        builder = RecordBatchBuilder(max_batch_size=1 << 30)
        for i in range(first, first + BATCH):
            key = bytes(rnd.randrange(5, 16)) if case == "keyed" else None
            if case == "run":
                value: bytes | None = bytes(100)
            elif case == "wide":
                value = bytes(rnd.randrange(20, 301))
            else:
                value = bytes(rnd.randrange(50, 151))
            if case == "nulls" and rnd.random() < 0.1:
                value = None
            headers = [("h", b"1")] if case == "hdrs" and i % 50 == 49 else None
            builder.append(base + i // 7, key, value, headers, offset_delta=i - first)
        out.append(bytes(builder.build(base_offset=first)))
    return b"".join(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("case", choices=CASES)
    ap.add_argument("n", type=int)
    ap.add_argument("--dir", default="/tmp", help="where the built batches are kept")
    args = ap.parse_args()
    path = Path(args.dir) / f"kontrakt-stretches-{args.case}.bin"
    if not path.exists():
        path.write_bytes(make(args.case))
    data = path.read_bytes()
    total = 0
    for _ in range(args.n):
        for records, *_ in iter_partition_chunks(
                "t", 0, data, 0, read_committed=False, aborted=None, check_crcs=True,
                chunk_bytes=512 * 1024, chunk_cost=8 << 20):
            total += len(records)
            del records
    assert total == args.n * RECORDS, total


if __name__ == "__main__":
    main()
