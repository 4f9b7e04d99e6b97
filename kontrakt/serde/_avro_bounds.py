"""Bounds on what one untrusted Avro payload can make fastavro build.

fastavro trusts the counts in the bytes it reads. An array of a type that encodes in zero bytes
(``null``, a record of such fields, ``fixed`` of size 0) takes any item count from a few bytes:
5 bytes decode to 10 million ``None`` in 0.6 s, and a count of 2**62 (10 bytes) runs until
memory is gone. A recursive schema nests as deep as the payload says, and fastavro's compiled
reader recurses in C: about 5,000 levels (a 5 KB payload of a linked list) overflow the stack
and kill the process with SIGSEGV.

The bounds are checked without slowing the common case. From the writer schema alone,
:class:`AvroBounds` works out the longest payload that cannot break any limit: every
collection item, map entry and union value but zero-byte items costs at least one byte, so
the payload length caps the item counts, the values built (times the most values one such
unit can build per byte) and the nesting (times the longest chain of records between two
byte-consuming levels). Payloads up to that length, nearly all of them, are decoded as they
are (one length comparison); longer ones, and every payload of a schema with zero-byte array
items, are first walked by a scanner that reads counts and lengths without building anything
and stops at the first limit.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from kontrakt.errors import ConfigError, SerializationError

__all__ = ["LIMIT_DEFAULTS", "AvroBounds", "check_limits", "collect_named_types"]

#: The deserializer config keys of the bounds and their defaults.
LIMIT_DEFAULTS: dict[str, int] = {
    # Items of one array or entries of one map (all its blocks).
    "max.collection.items": 10_000_000,
    # Values one record decodes to: each record, array, map, map key and primitive counts 1.
    # 10 million empty records take about 0.7 GB and 0.5 s in fastavro.
    "max.decoded.values": 10_000_000,
    # Records, arrays and maps nested in one another; fastavro's stack gives out near 5,000.
    # The scanner recurses too (up to 2 Python frames a level): above ~400 the interpreter's
    # recursion limit (sys.setrecursionlimit) must be raised with it.
    "max.nesting.depth": 256,
}

_PRIMITIVE_BYTES = {"null": 0, "boolean": 1, "int": 1, "long": 1, "float": 4, "double": 8,
                    "bytes": 1, "string": 1}
_INF = float("inf")
_NESTS = ("record", "error", "array", "map")
# fastavro caps a varint at 10 bytes too (a long); more is corrupt.
_MAX_VARINT = 10

Scan = Callable[[bytes, int, int, "_State"], int]


def check_limits(conf: Mapping[str, Any], owner: str) -> tuple[int, int, int]:
    """Validate the limit keys of a parsed config.

    Returns:
        ``(max.collection.items, max.decoded.values, max.nesting.depth)``.

    Raises:
        ConfigError: a limit that is not a positive integer.
    """
    out = []
    for key in LIMIT_DEFAULTS:
        value = conf[key]
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ConfigError(f"{owner}: {key} must be a positive int, got {value!r}")
        out.append(value)
    return out[0], out[1], out[2]


def collect_named_types(t: Any, named: dict[str, Any]) -> None:
    """Add every named type (record, error, enum, fixed) defined inside the parsed Avro
    schema ``t`` to ``named`` by its name (fastavro's parsed form defines each in place),
    keeping entries already there."""
    if isinstance(t, list):
        for branch in t:
            collect_named_types(branch, named)
    elif isinstance(t, dict):
        kind = t.get("type")
        if kind in ("record", "error", "enum", "fixed") and isinstance(t.get("name"), str):
            named.setdefault(t["name"], t)
        if kind in ("record", "error"):
            for f in t.get("fields", ()):
                collect_named_types(f["type"], named)
        elif kind == "array":
            collect_named_types(t["items"], named)
        elif kind == "map":
            collect_named_types(t["values"], named)
        elif isinstance(kind, (dict, list)):
            collect_named_types(kind, named)


class _Unbounded(Exception):
    """The schema has a record that contains itself through record fields only."""


class _State:
    __slots__ = ("end", "values")

    def __init__(self, end: int) -> None:
        self.end = end
        self.values = 0


def _truncated() -> SerializationError:
    return SerializationError("the Avro payload is truncated or corrupt")


def _skip_varint(data: bytes, pos: int) -> int:
    start = pos
    while data[pos] & 0x80:
        pos += 1
        if pos - start >= _MAX_VARINT:
            raise _truncated()
    return pos + 1


def _read_long(data: bytes, pos: int) -> tuple[int, int]:
    b = data[pos]
    n = b & 0x7F
    shift = 7
    pos += 1
    while b & 0x80:
        b = data[pos]
        n |= (b & 0x7F) << shift
        shift += 7
        pos += 1
        if shift > 7 * _MAX_VARINT:
            raise _truncated()
    return (n >> 1) ^ -(n & 1), pos


class AvroBounds:
    """The limits of one writer schema, and the check of a payload against them.

    Args:
        writer: the writer schema as fastavro's ``parse_schema`` returned it.
        max_items, max_values, max_depth: the configured limits.

    Raises:
        SerializationError: the schema has a record that contains itself through record fields
            only: no finite value of it exists, and fastavro would recurse until it crashes.
    """

    def __init__(self, writer: Any, max_items: int, max_values: int, max_depth: int) -> None:
        self.max_items = max_items
        self.max_values = max_values
        self.max_depth = max_depth
        self.named: dict[str, Any] = {}
        if isinstance(writer, dict):
            self.named.update(writer.get("__named_schemas") or {})
        collect_named_types(writer, self.named)
        try:
            #: payloads up to this many bytes need no scan (-1: every payload is scanned;
            #: None: the schema cannot be analysed, payloads are not checked)
            self.safe_len: float | None = self._safe_len(writer)
        except KeyError:
            # A name defined only in a referenced schema under a top-level union: fastavro
            # keeps no table of it, and fails on such payloads itself (UnknownType).
            self.safe_len = None
        except _Unbounded as e:
            raise SerializationError(
                f"the Avro record {e} contains itself through record fields only: no finite "
                "value of it exists") from None
        self._scans: dict[str, Scan] = {}
        self._top: Scan | None = None
        if self.safe_len is not None:
            self._top = self._compile(writer)

    def check(self, data: bytes, offset: int) -> None:
        """Walk the payload ``data[offset:]`` and raise at the first limit it breaks.

        Raises:
            SerializationError: a limit is broken, or the bytes cannot be this schema's.
        """
        assert self._top is not None
        state = _State(len(data))
        try:
            self._top(data, offset, 1, state)
        except IndexError:
            raise _truncated() from None
        except RecursionError:
            # The interpreter's recursion limit came before max.nesting.depth (set above
            # ~400, without raising sys.setrecursionlimit).
            raise SerializationError(
                f"the Avro value nests too deep to check within the interpreter's recursion "
                f"limit (max.nesting.depth is {self.max_depth})") from None

    # -- analysis ------------------------------------------------------------------------
    def _resolve(self, t: Any) -> Any:
        while True:
            if isinstance(t, str):
                if t in _PRIMITIVE_BYTES:
                    return t
                t = self.named[t]
            elif isinstance(t, dict):
                kind = t["type"]
                if kind in _PRIMITIVE_BYTES:
                    return kind  # a primitive with a logical type or other attributes
                if isinstance(kind, (str, dict, list)) and kind not in (
                        "record", "error", "enum", "fixed", "array", "map"):
                    t = kind
                    continue
                return t
            else:
                return t

    def _record(self, memo: dict[int, Any], t: Any,
                compute: Callable[[dict[str, Any]], Any]) -> Any:
        """Memoized per record; meeting a record again while computing it (through record
        fields only) means it contains itself."""
        key = id(t)
        if key in memo:
            if memo[key] is None:
                raise _Unbounded(t.get("name", "?"))
            return memo[key]
        memo[key] = None
        memo[key] = value = compute(t)
        return value

    def _min_bytes(self, t: Any) -> int:
        """The fewest bytes a value of ``t`` encodes in (unions, arrays, maps: 1)."""
        t = self._resolve(t)
        if isinstance(t, str):
            return _PRIMITIVE_BYTES[t]
        if isinstance(t, list):
            return 1
        kind = t["type"]
        if kind == "fixed":
            return int(t["size"])
        if kind in ("record", "error"):
            return int(self._record(self._memo_bytes, t, lambda r: sum(
                self._min_bytes(f["type"]) for f in r["fields"])))
        return 1  # enum, array, map

    def _fixed_values(self, t: Any) -> int:
        """Values a ``t`` builds besides its collections' items and its unions' values."""
        t = self._resolve(t)
        if isinstance(t, str):
            return 1
        if isinstance(t, list):
            return 0
        if t["type"] in ("record", "error"):
            return int(self._record(self._memo_values, t, lambda r: 1 + sum(
                self._fixed_values(f["type"]) for f in r["fields"])))
        return 1

    def _record_chain(self, t: Any) -> int:
        """The most records nested directly in one another from ``t`` on (no union, array or
        map between: such a chain consumes no byte)."""
        t = self._resolve(t)
        if isinstance(t, dict) and t["type"] in ("record", "error"):
            return int(self._record(self._memo_chain, t, lambda r: 1 + max(
                (self._record_chain(f["type"]) for f in r["fields"]), default=0)))
        return 0

    def _depth(self, t: Any) -> float:
        """How many records, arrays and maps a ``t`` nests at most (inf: recursive)."""
        t = self._resolve(t)
        if isinstance(t, str):
            return 0
        key = id(t)
        if key in self._memo_depth:
            done = self._memo_depth[key]
            return _INF if done is None else done
        self._memo_depth[key] = None
        if isinstance(t, list):
            inner = [self._depth(b) for b in t]
            depth = max(inner, default=0)
        else:
            kind = t["type"]
            if kind in ("record", "error"):
                inner = [self._depth(f["type"]) for f in t["fields"]]
            elif kind == "array":
                inner = [self._depth(t["items"])]
            elif kind == "map":
                inner = [self._depth(t["values"])]
            else:
                inner = []
            depth = max(inner, default=0) + (1 if kind in _NESTS else 0)
        self._memo_depth[key] = depth
        return depth

    def _ratio(self, t: Any, done: set[int]) -> float:
        """The most values one unit (a collection item or map entry, a union's value) builds
        per byte it consumes, over every type reachable from ``t``."""
        t = self._resolve(t)
        if isinstance(t, str) or id(t) in done:
            return 0.0
        done.add(id(t))
        ratio = 0.0
        if isinstance(t, list):
            for branch in t:
                ratio = max(ratio, self._fixed_values(branch) / (1 + self._min_bytes(branch)),
                            self._ratio(branch, done))
            return ratio
        kind = t["type"]
        if kind in ("record", "error"):
            for f in t["fields"]:
                ratio = max(ratio, self._ratio(f["type"], done))
        elif kind == "array":
            self._collections = True
            item_bytes = self._min_bytes(t["items"])
            per_item = self._fixed_values(t["items"])
            ratio = max(per_item / item_bytes if item_bytes else _INF,
                        self._ratio(t["items"], done))
        elif kind == "map":
            self._collections = True
            per_entry = (1 + self._fixed_values(t["values"])) / (1 + self._min_bytes(t["values"]))
            ratio = max(per_entry, self._ratio(t["values"], done))
        return ratio

    def _max_chain(self, t: Any, done: set[int]) -> int:
        """The longest direct record chain anywhere in ``t``."""
        t = self._resolve(t)
        if isinstance(t, str) or id(t) in done:
            return 0
        done.add(id(t))
        if isinstance(t, list):
            return max((self._max_chain(b, done) for b in t), default=0)
        kind = t["type"]
        if kind in ("record", "error"):
            return max(self._record_chain(t),
                       max((self._max_chain(f["type"], done) for f in t["fields"]), default=0))
        if kind == "array":
            return self._max_chain(t["items"], done)
        if kind == "map":
            return self._max_chain(t["values"], done)
        return 0

    def _safe_len(self, writer: Any) -> float:
        self._memo_bytes: dict[int, Any] = {}
        self._memo_values: dict[int, Any] = {}
        self._memo_chain: dict[int, Any] = {}
        self._memo_depth: dict[int, Any] = {}
        self._collections = False
        ratio = self._ratio(writer, set())  # raises _Unbounded for a record-only cycle
        top = self._fixed_values(writer)
        depth = self._depth(writer)
        limits: list[float] = []
        # Values: at most `top` plus `ratio` per payload byte.
        if top > self.max_values or ratio == _INF:
            return -1  # zero-byte array items: every payload is scanned
        limits.append((self.max_values - top) / ratio if ratio else _INF)
        # Items of one collection: at most one per byte (zero-byte items made ratio infinite).
        if self._collections:
            limits.append(self.max_items)
        # Depth: between two byte-consuming levels (union, array, map) at most `chain`
        # records, so a payload of n bytes nests at most (n + 1) * (chain + 1) levels.
        if depth > self.max_depth:
            limits.append(self.max_depth // (self._max_chain(writer, set()) + 1) - 1)
        safe = min(limits, default=_INF)
        return -1 if safe < 0 else safe

    # -- the scanner ---------------------------------------------------------------------
    def _compile(self, t: Any) -> Scan:
        t = self._resolve(t)
        if isinstance(t, str):
            return _PRIMITIVE_SCANS[t]
        if isinstance(t, list):
            branches = [self._compile(b) for b in t]
            count = len(branches)

            def scan_union(data: bytes, pos: int, depth: int, st: _State) -> int:
                index, pos = _read_long(data, pos)
                if not 0 <= index < count:
                    raise SerializationError(f"Avro union index {index} out of range")
                return branches[index](data, pos, depth, st)
            return scan_union
        kind = t["type"]
        name = t.get("name")
        if isinstance(name, str) and name in self._scans:
            return self._scans[name]
        if kind == "fixed":
            size = int(t["size"])

            def scan_fixed(data: bytes, pos: int, depth: int, st: _State) -> int:
                st.values += 1
                pos += size
                if pos > st.end:
                    raise _truncated()
                return pos
            return scan_fixed
        if kind == "enum":
            return _scan_varint
        max_depth, max_values, max_items = self.max_depth, self.max_values, self.max_items
        if kind in ("record", "error"):
            fields: list[Scan] = []

            def scan_record(data: bytes, pos: int, depth: int, st: _State) -> int:
                if depth > max_depth:
                    raise SerializationError(
                        f"the Avro value nests deeper than max.nesting.depth ({max_depth})")
                st.values += 1
                for field in fields:
                    pos = field(data, pos, depth + 1, st)
                if st.values > max_values:
                    raise _too_many_values(max_values)
                return pos
            if isinstance(name, str):
                self._scans[name] = scan_record  # before the fields: they may refer to it
            fields.extend(self._compile(f["type"]) for f in t["fields"])
            return scan_record
        is_map = kind == "map"
        item_type = t["values"] if is_map else t["items"]
        item = self._compile(item_type)
        item_bytes = self._min_bytes(item_type) + (1 if is_map else 0)
        item_values = self._fixed_values(item_type) + (1 if is_map else 0)
        what = "map entries" if is_map else "array items"

        def scan_collection(data: bytes, pos: int, depth: int, st: _State) -> int:
            if depth > max_depth:
                raise SerializationError(
                    f"the Avro value nests deeper than max.nesting.depth ({max_depth})")
            st.values += 1
            total = 0
            while True:
                count, pos = _read_long(data, pos)
                if count == 0:
                    return pos
                if count < 0:  # a block with its size in bytes: the size is not needed here
                    count = -count
                    pos = _skip_varint(data, pos)
                total += count
                if total > max_items:
                    raise SerializationError(
                        f"an Avro value has more than max.collection.items ({max_items}) "
                        f"{what}")
                if not item_bytes:
                    st.values += count * item_values
                    if st.values > max_values:
                        raise _too_many_values(max_values)
                    continue
                if count * item_bytes > st.end - pos:
                    raise SerializationError(
                        f"an Avro block of {count} {what} is longer than the payload left")
                for _ in range(count):
                    if is_map:
                        pos = _scan_bytes(data, pos, depth, st)
                    pos = item(data, pos, depth + 1, st)
                if st.values > max_values:
                    raise _too_many_values(max_values)
        return scan_collection


def _too_many_values(limit: int) -> SerializationError:
    return SerializationError(f"the Avro record decodes to more than max.decoded.values "
                              f"({limit}) values")


def _scan_null(data: bytes, pos: int, depth: int, st: _State) -> int:
    st.values += 1
    return pos


def _scan_varint(data: bytes, pos: int, depth: int, st: _State) -> int:
    st.values += 1
    return _skip_varint(data, pos)


def _scan_boolean(data: bytes, pos: int, depth: int, st: _State) -> int:
    st.values += 1
    if pos >= st.end:
        raise _truncated()
    return pos + 1


def _scan_width(width: int) -> Scan:
    def scan(data: bytes, pos: int, depth: int, st: _State) -> int:
        st.values += 1
        pos += width
        if pos > st.end:
            raise _truncated()
        return pos
    return scan


def _scan_bytes(data: bytes, pos: int, depth: int, st: _State) -> int:
    st.values += 1
    size, pos = _read_long(data, pos)
    if size < 0 or pos + size > st.end:
        raise SerializationError(f"an Avro string or bytes of {size} bytes is longer than "
                                 "the payload left")
    return pos + size


_PRIMITIVE_SCANS: dict[str, Scan] = {
    "null": _scan_null, "boolean": _scan_boolean, "int": _scan_varint, "long": _scan_varint,
    "float": _scan_width(4), "double": _scan_width(8), "bytes": _scan_bytes,
    "string": _scan_bytes,
}
