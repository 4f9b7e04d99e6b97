"""Record batch encode/decode throughput: kontrakt next to kafka-python and aiokafka.

Encode = append N records (100-byte values, no key, no headers by default) to a v2 batch builder
and build the batch (compression included). Decode = parse the batch (CRC checked),
decompress, and materialise every record object. All three libraries run in this process, one
core, interleaved round by round; each figure is the best round (least disturbed by other load).

Run:  python benchmarks/records.py [--records 1000] [--value-size 100] [--rounds 15]
"""

from __future__ import annotations

import argparse
import gc
import random
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from kontrakt.protocol.records import (
    CompressionType,
    RecordBatchBuilder,
    iter_batches,
)

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
TIMESTAMP = 1_700_000_000_000


def make_values(count: int, size: int) -> list[bytes]:
    """Values that compress about as well as typical JSON payloads (not random noise)."""
    rng = random.Random(42)
    words = [b"user", b"order", b"id", b"price", b"amount", b"EUR", b"ok", b"status", b"ts"]
    out = []
    for i in range(count):
        chunk = b'{"n":%d' % i
        while len(chunk) < size:
            chunk += b',"' + rng.choice(words) + b'":' + str(rng.randint(0, 99999)).encode()
        out.append(chunk[:size])
    return out


def kontrakt_codec(codec: str, values: list[bytes]) -> tuple[Callable[[], object],
                                                                Callable[[], object]]:
    def encode() -> bytes:
        builder = RecordBatchBuilder(compression=codec, max_batch_size=1 << 30)
        append = builder.append
        for value in values:
            append(TIMESTAMP, None, value)
        return builder.build()

    blob = encode()

    def decode() -> int:
        n = 0
        for batch in iter_batches(blob):
            n += len(batch.records())
        return n

    return encode, decode


def peer_codec(module: object, codec: str,
               values: list[bytes]) -> tuple[Callable[[], object], Callable[[], object]] | None:
    builder_cls = module.DefaultRecordBatchBuilder  # type: ignore[attr-defined]
    batch_cls = module.DefaultRecordBatch  # type: ignore[attr-defined]
    codec_id = int(CompressionType.from_name(codec))

    def encode() -> bytes:
        builder = builder_cls(2, codec_id, 0, -1, -1, -1, 1 << 30)
        append = builder.append
        for i, value in enumerate(values):
            append(i, TIMESTAMP, None, value, [])
        return bytes(builder.build())

    try:
        blob = encode()
        batch = batch_cls(blob)
        list(batch)
    except Exception as exc:  # the peer lacks the codec library
        print(f"  ({module.__name__} cannot do {codec}: {type(exc).__name__})")  # type: ignore[attr-defined]
        return None

    def decode() -> int:
        batch = batch_cls(blob)
        batch.validate_crc()
        n = 0
        for record in batch:
            record.value  # noqa: B018 - touch like a consumer would
            n += 1
        return n

    return encode, decode


def best_time(fn: Callable[[], object], budget: float) -> float:
    """Best wall time of one call, running calls for about ``budget`` seconds."""
    best = float("inf")
    deadline = time.perf_counter() + budget
    while True:
        t0 = time.perf_counter()
        fn()
        elapsed = time.perf_counter() - t0
        best = min(best, elapsed)
        if t0 + elapsed > deadline:
            return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--records", type=int, default=1000, help="records per batch")
    parser.add_argument("--value-size", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=15, help="interleaved rounds")
    parser.add_argument("--budget", type=float, default=0.05, help="seconds per round and fn")
    parser.add_argument("--codecs", default=",".join(CODECS))
    args = parser.parse_args()

    import aiokafka.record.default_records as aiokafka_records
    import kafka.record.default_records as kafka_python_records

    values = make_values(args.records, args.value_size)
    print(f"python {sys.version.split()[0]}; {args.records} records/batch, "
          f"{args.value_size}-byte values; records/s (best of {args.rounds} rounds)\n")
    header = (f"{'codec':<8}{'op':<8}{'kontrakt':>12}{'kafka-python':>14}{'aiokafka':>12}"
              f"{'vs kafka-py':>13}{'vs aiokafka':>13}")
    print(header)
    print("-" * len(header))
    for codec in args.codecs.split(","):
        impls = {
            "kontrakt": kontrakt_codec(codec, values),
            "kafka-python": peer_codec(kafka_python_records, codec, values),
            "aiokafka": peer_codec(aiokafka_records, codec, values),
        }
        best: dict[tuple[str, str], float] = {}
        for _ in range(args.rounds):
            for name, pair in impls.items():
                if pair is None:
                    continue
                for op, fn in zip(("encode", "decode"), pair, strict=True):
                    gc.collect()
                    t = best_time(fn, args.budget)
                    key = (name, op)
                    best[key] = min(best.get(key, float("inf")), t)
        for op in ("encode", "decode"):
            rates = {name: args.records / best[(name, op)] if (name, op) in best else None
                     for name in impls}
            k = rates["kontrakt"]
            assert k is not None

            def fmt(rate: float | None) -> str:
                return f"{rate:,.0f}" if rate else "n/a"

            def ratio(rate: float | None, k: float = k) -> str:
                return f"{k / rate:.2f}x" if rate else "n/a"

            print(f"{codec:<8}{op:<8}{fmt(k):>12}{fmt(rates['kafka-python']):>14}"
                  f"{fmt(rates['aiokafka']):>12}{ratio(rates['kafka-python']):>13}"
                  f"{ratio(rates['aiokafka']):>13}")


if __name__ == "__main__":
    main()
