"""RecordBatchBuilder: ``append`` a record at a time against ``append_many`` a run, in one
process, as the Spark sink's bulk append fills batches: ``--records`` 60-byte values
(8-byte keys with ``--keyed``) in chunks of 10,000 into builders of 128 KiB, each batch
built (joined and checksummed). Prints ns of this process's CPU time a record, best of
``--rounds``.

A fixed workload, so that it can also be counted in instructions, which a loaded machine
does not disturb (``none`` only makes the data, to subtract)::

    valgrind --tool=callgrind --callgrind-out-file=/dev/null \\
        .venv/bin/python benchmarks/record_runs.py many --records 50000 --rounds 1

Run:  .venv/bin/python benchmarks/record_runs.py {one,many,none} [--keyed]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from kontrakt.protocol.records import RecordBatchBuilder

_BATCH = 128 * 1024
_CHUNK = 10_000


def fill(mode: str, values: list[bytes], keys: list[bytes] | None) -> int:
    """Fill builders with every record, chunk by chunk; return the bytes built."""
    built = 0
    for c in range(0, len(values), _CHUNK):
        chunk = values[c:c + _CHUNK]
        chunk_keys = None if keys is None else keys[c:c + _CHUNK]
        b = RecordBatchBuilder(max_batch_size=_BATCH)
        if mode == "many":
            pos = b.append_many(1000, chunk_keys, chunk)
            while pos < len(chunk):
                built += len(b.build())
                b = RecordBatchBuilder(max_batch_size=_BATCH)
                pos += b.append_many(1000, chunk_keys, chunk, start=pos)
        else:
            for i, value in enumerate(chunk):
                key = None if chunk_keys is None else chunk_keys[i]
                if b.append(1000, key, value) is None:
                    built += len(b.build())
                    b = RecordBatchBuilder(max_batch_size=_BATCH)
                    b.append(1000, key, value)
        built += len(b.build())
    return built


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("mode", choices=("one", "many", "none"))
    ap.add_argument("--records", type=int, default=200_000)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--keyed", action="store_true")
    args = ap.parse_args()
    n = args.records
    values = [b"%060d" % i for i in range(n)]
    keys = [b"%08d" % i for i in range(n)] if args.keyed else None
    if args.mode == "none":
        return
    best = float("inf")
    for _ in range(args.rounds):
        start = time.process_time()
        fill(args.mode, values, keys)
        best = min(best, time.process_time() - start)
    print(f"{args.mode}{' keyed' if keys else ''}: {best / n * 1e9:,.0f} ns/record CPU")


if __name__ == "__main__":
    main()
