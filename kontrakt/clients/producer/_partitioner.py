"""Partitioners: which partition a record goes to (sans-I/O).

* :func:`murmur2` is the Java client's hash (``Utils.murmur2``); keyed records go to
  ``(murmur2(key) & 0x7fffffff) % len(all_partitions)``, the same partition the Java client,
  kafka-python and aiokafka choose for the same key and partition count.
* Records without a key stick to one partition until a new batch is started there
  (KIP-480), then move to another available partition.
* ``round_robin`` cycles through the available partitions record by record.
* Any callable ``partitioner(key, all_partitions, available_partitions) -> int`` can be given
  (kafka-python's signature).
"""

from __future__ import annotations

import itertools
import random
import struct
from collections.abc import Callable, Sequence
from typing import Any, Protocol

__all__ = [
    "DefaultPartitioner",
    "Partitioner",
    "RoundRobinPartitioner",
    "murmur2",
    "murmur2_partition",
    "murmur2_partitions",
]

_M = 0x5BD1E995
_MASK = 0xFFFFFFFF
_SEED = 0x9747B28C
_WORDS = [struct.Struct(f"<{n}I").unpack_from for n in range(64)]


def murmur2(data: bytes) -> int:
    """The Java client's 32-bit murmur2 hash of ``data``, as a signed 32-bit int.

    Args:
        data: the serialized key.

    Returns:
        The hash in -2**31 .. 2**31-1, equal to ``org.apache.kafka.common.utils.Utils.murmur2``.
    """
    h = _hash(data)
    return h - (1 << 32) if h & 0x80000000 else h


def _hash(data: bytes, m: int = _M, mask: int = _MASK, words: list[Any] = _WORDS) -> int:
    # Unsigned murmur2; written for speed (it runs once per keyed record): little-endian
    # words in one unpack call, multiplications masked to 32 bits, no helper calls.
    length = len(data)
    h = _SEED ^ length
    n4 = length >> 2
    if n4:
        for k in (words[n4] if n4 < 64 else struct.Struct(f"<{n4}I").unpack_from)(data):
            k = k * m & mask
            h = (h * m & mask) ^ ((k ^ k >> 24) * m & mask)
    extra = length & 3
    if extra:
        tail = length - extra
        if extra == 3:
            h ^= data[tail + 2] << 16 | data[tail + 1] << 8 | data[tail]
        elif extra == 2:
            h ^= data[tail + 1] << 8 | data[tail]
        else:
            h ^= data[tail]
        h = h * m & mask
    h = (h ^ h >> 13) * m & mask
    return h ^ h >> 15


def _specialized(length: int, positive: bool = False) -> Callable[[bytes], int]:
    # The hash for keys of exactly ``length`` bytes, as straight-line code: no loop, no length
    # tests, the words and the tail taken by one unpack call, the first round's seed product
    # folded into a constant. Built once per length (like the protocol codecs) because keyed
    # records hash on every send. Each operation on an int above 2**30 is a multi-digit
    # operation in CPython, so the code does as few as it can: ``h`` is masked to 32 bits
    # only every other round and before shifts (a product's low 32 bits depend only on the
    # factors' low 32 bits, and xor does not carry), and the two products of a round are
    # xored before one mask. ``positive`` returns ``murmur2 & 0x7fffffff`` (the partition
    # hash) instead of the unsigned hash.
    n4, extra = length >> 2, length & 3
    m, mask = _M, _MASK
    h0 = _SEED ^ length
    names = [f"w{i}" for i in range(n4)] + (["t", "u"] if extra == 3 else ["t"] if extra else [])
    fmt = "<" + "I" * n4 + ("", "B", "H", "HB")[extra]
    src = [f"def hash_{length}(d):"]
    if names:
        src.append(f"    {', '.join(names)}{',' if len(names) == 1 else ''} = unpack(d)")
    for i in range(n4):
        src.append(f"    k = w{i} * {m} & {mask}")
        if i == 0:
            src.append(f"    h = {(h0 * m) & mask} ^ (k ^ k >> 24) * {m}")
        elif i % 2:
            src.append(f"    h = (h * {m} ^ (k ^ k >> 24) * {m}) & {mask}")
        else:
            src.append(f"    h = h * {m} ^ (k ^ k >> 24) * {m}")
    h = "h" if n4 else str(h0)
    if extra == 3:
        src.append(f"    h = ({h} ^ (u << 16 | t)) * {m} & {mask}")
    elif extra:
        src.append(f"    h = ({h} ^ t) * {m} & {mask}")
    elif n4:
        src.append(f"    h &= {mask}")
    else:
        src.append(f"    h = {h0}")
    src.append(f"    h = (h ^ h >> 13) * {m} & {mask}")
    src.append("    return (h ^ h >> 15) & 0x7FFFFFFF" if positive else "    return h ^ h >> 15")
    namespace: dict[str, Any] = {"unpack": struct.Struct(fmt).unpack}
    exec(compile("\n".join(src), f"<murmur2 for {length}-byte keys>", "exec"), namespace)
    fn: Callable[[bytes], int] = namespace[f"hash_{length}"]
    return fn


def _built_on_first_use(table: list[Callable[[bytes], int]], length: int,
                        positive: bool) -> Callable[[bytes], int]:
    # Compiling all 128 functions at import cost ~20 ms of every program's start; a table
    # slot holds this stub until a key of its length is hashed, then the real function.
    # Two threads racing here build equal functions, so the lost write is harmless.
    def first_call(key: bytes) -> int:
        fn = table[length] = _specialized(length, positive)
        return fn(key)
    return first_call


#: unsigned murmur2 by key length, for keys shorter than 64 bytes
HASH_BY_LENGTH: list[Callable[[bytes], int]] = []
HASH_BY_LENGTH.extend(_built_on_first_use(HASH_BY_LENGTH, n, False) for n in range(64))
#: ``murmur2(key) & 0x7fffffff`` (what the default partitioner takes modulo the partition
#: count) by key length, for keys shorter than 64 bytes
PARTITION_HASH_BY_LENGTH: list[Callable[[bytes], int]] = []
PARTITION_HASH_BY_LENGTH.extend(
    _built_on_first_use(PARTITION_HASH_BY_LENGTH, n, True) for n in range(64))


def key_hash(key: bytes) -> int:
    """Unsigned murmur2 of ``key`` (fast path by length)."""
    n = len(key)
    return HASH_BY_LENGTH[n](key) if n < 64 else _hash(key)


def murmur2_partition(key: bytes, num_partitions: int) -> int:
    """The partition the Java client's default partitioner picks for ``key``.

    Args:
        key: the serialized key (not None).
        num_partitions: how many partitions the topic has (> 0).

    Returns:
        ``(murmur2(key) & 0x7fffffff) % num_partitions``.
    """
    return (_hash(key) & 0x7FFFFFFF) % num_partitions


#: below this many keys of one length, hashing them one by one is as fast
_MIN_LANES = 8
_LANE_MASKS: dict[int, tuple[int, int, int]] = {}


def _lane_masks(n: int) -> tuple[int, int, int]:
    # For n 64-bit lanes: 0xFFFFFFFF in each (keeps a lane's low 32 bits), 0x7FFFFFFF in
    # each, and 1 in each (times a 32-bit constant, that constant in every lane).
    masks = _LANE_MASKS.get(n)
    if masks is None:
        if len(_LANE_MASKS) > 64:
            _LANE_MASKS.clear()
        masks = _LANE_MASKS[n] = (
            int.from_bytes(b"\xff\xff\xff\xff\0\0\0\0" * n, "little"),
            int.from_bytes(b"\xff\xff\xff\x7f\0\0\0\0" * n, "little"),
            int.from_bytes(b"\x01\0\0\0\0\0\0\0" * n, "little"))
    return masks


def _divider(n: int, divisor: int) -> tuple[int, int, int]:
    # Division of n 31-bit lanes by ``divisor`` as a multiplication and a shift
    # (Granlund-Montgomery): with l = ceil(log2(divisor)) and magic = ceil(2**(31 + l) /
    # divisor), x // divisor == x * magic >> (31 + l) for every x < 2**31. magic has at most
    # 32 bits, so a lane's product stays inside its 64 bits; after the shift, the bits the
    # lane above spilled into the top of a lane are masked off.
    key = (n, divisor)
    found = _DIVIDERS.get(key)
    if found is None:
        if len(_DIVIDERS) > 64:
            _DIVIDERS.clear()
        shift = 31 + (divisor - 1).bit_length()
        magic = -(-(1 << shift) // divisor)
        lane = ((1 << (64 - shift)) - 1).to_bytes(8, "little")
        found = _DIVIDERS[key] = (shift, magic, int.from_bytes(lane * n, "little"))
    return found


_DIVIDERS: dict[tuple[int, int], tuple[int, int, int]] = {}


def _lane_remainders(lanes: int, n: int, divisor: int) -> int:
    # Each of n 64-bit lanes (values below 2**31) modulo ``divisor``: a lane's quotient
    # times the divisor is at most the lane's value, so the subtraction borrows nothing
    # from the lane above.
    shift, magic, quotient = _divider(n, divisor)
    return lanes - (lanes * magic >> shift & quotient) * divisor


def _hash_lanes(keys: Sequence[bytes], length: int, divisor: int) -> tuple[int, ...]:
    # (murmur2(key) & 0x7fffffff) % divisor of many keys of one length at once. Each key
    # gets a 64-bit lane of one big int, its 32-bit state in the lane's low half: a lane
    # times a 32-bit constant stays inside the lane, so one big-int operation (a C loop
    # over the digits) does a step of the hash for every key, where hashing key by key costs
    # ~25 interpreted int operations per key. Shifts spill bits into the upper half of the
    # lane below; masking before the next multiplication drops them.
    n = len(keys)
    low, positive, ones = _lane_masks(n)
    m = _M
    data = b"".join(keys)
    h = ((_SEED ^ length) & _MASK) * ones
    # The lanes' bytes: word i of key j at bytes 8j..8j+3, gathered by strided slices.
    lanes = bytearray(8 * n)
    for off in range(0, length & ~3, 4):
        lanes[0::8] = data[off::length]
        lanes[1::8] = data[off + 1::length]
        lanes[2::8] = data[off + 2::length]
        lanes[3::8] = data[off + 3::length]
        k = int.from_bytes(lanes, "little") * m & low
        k = (k ^ k >> 24) & low
        h = (h * m ^ k * m) & low
    extra = length & 3
    if extra:
        lanes = bytearray(8 * n)
        tail = length - extra
        for i in range(extra):
            lanes[i::8] = data[tail + i::length]
        h = (h ^ int.from_bytes(lanes, "little")) * m & low
    h = (h ^ h >> 13) & low
    h = h * m & low
    h = _lane_remainders((h ^ h >> 15) & positive, n, divisor)
    return struct.unpack(f"<{n}Q", h.to_bytes(8 * n, "little"))


def murmur2_partitions(keys: Sequence[bytes], num_partitions: int,
                       lengths: list[int] | None = None) -> list[int]:
    """:func:`murmur2_partition` of many keys at once, several times faster per key.

    Args:
        keys: serialized keys (bytes, not None).
        num_partitions: how many partitions the topic has (> 0).
        lengths: the keys' lengths, if the caller has them (saves a pass over the keys).

    Returns:
        The partition of each key, in order.
    """
    n = len(keys)
    mod = num_partitions.__rmod__
    if n < _MIN_LANES:
        return [mod(_hash(k) & 0x7FFFFFFF) for k in keys]
    length = len(keys[0])
    if lengths is None:
        lengths = [*map(len, keys)]
    if lengths.count(length) == n:
        return [*_hash_lanes(keys, length, num_partitions)]
    # Mixed lengths: each length's keys together.
    groups: dict[int, list[int]] = {}
    for i, size in enumerate(lengths):
        group = groups.get(size)
        if group is None:
            groups[size] = [i]
        else:
            group.append(i)
    out = [0] * n
    for size, idx in groups.items():
        if len(idx) < _MIN_LANES:
            for i in idx:
                out[i] = mod(_hash(keys[i]) & 0x7FFFFFFF)
        else:
            parts = _hash_lanes([keys[i] for i in idx], size, num_partitions)
            for i, part in zip(idx, parts, strict=True):
                out[i] = part
    return out


class Partitioner(Protocol):
    """What a user partitioner looks like: ``(key, all_partitions, available) -> partition``.

    ``all_partitions`` and ``available_partitions`` are sorted lists of partition ids
    (``available`` holds those with a leader; it may be empty).
    """

    def __call__(self, key: bytes | None, all_partitions: Sequence[int],
                 available_partitions: Sequence[int]) -> int: ...


class DefaultPartitioner:
    """murmur2 for keyed records, sticky partitions (KIP-480) for records without a key.

    Not thread-safe on its own; the producer calls it under its own discipline (sticky
    choices racing between threads only cost batching efficiency, never correctness).
    """

    __slots__ = ("current",)

    def __init__(self) -> None:
        #: topic -> its sticky partition now (read when staged unkeyed records settle)
        self.current: dict[str, int] = {}

    def __call__(self, key: bytes | None, all_partitions: Sequence[int],
                 available_partitions: Sequence[int]) -> int:
        """Pick a partition as kafka-python's DefaultPartitioner does (random for no key)."""
        if key is None:
            return random.choice(available_partitions or all_partitions)
        return all_partitions[(_hash(key) & 0x7FFFFFFF) % len(all_partitions)]

    def sticky_partition(self, topic: str, all_partitions: Sequence[int],
                         available_partitions: Sequence[int]) -> int:
        """The current sticky partition for unkeyed records of ``topic``."""
        part = self.current.get(topic)
        # A topic made again with fewer partitions no longer has the one kept (ids are
        # 0..n-1, so a length check does; `in` would walk the list per record).
        if part is None or part >= len(all_partitions):
            part = self.new_sticky(topic, -1, all_partitions, available_partitions)
        return part

    def new_sticky(self, topic: str, previous: int, all_partitions: Sequence[int],
                   available_partitions: Sequence[int]) -> int:
        """Move ``topic``'s sticky partition away from ``previous`` (a batch there filled)."""
        choices = available_partitions or all_partitions
        if len(choices) > 1:
            part = random.choice(choices)
            while part == previous:
                part = random.choice(choices)
        else:
            part = choices[0]
        self.current[topic] = part
        return part


class RoundRobinPartitioner:
    """Every record to the next available partition in turn, whatever its key.

    One counter per instance; the producer's built-in ``"round_robin"`` keeps one per topic.
    """

    __slots__ = ("_counter",)

    def __init__(self) -> None:
        self._counter = itertools.count()

    def __call__(self, key: bytes | None, all_partitions: Sequence[int],
                 available_partitions: Sequence[int]) -> int:
        """Pick the next partition (the key is ignored)."""
        choices = available_partitions or all_partitions
        return choices[next(self._counter) % len(choices)]


PartitionerLike = str | Callable[[bytes | None, Sequence[int], Sequence[int]], int]
