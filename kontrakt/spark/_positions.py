"""Where a read starts and ends: exactly one of ``assign`` / ``subscribe`` /
``subscribePattern``, and the ``startingOffsets`` / ``endingOffsets`` JSON and their
by-timestamp variants, in Spark's Kafka source's forms. Used by
:func:`kontrakt.spark._options.parse_options`, which re-exports the public names.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Literal

from kontrakt.errors import ConfigError

__all__ = ["EARLIEST", "LATEST", "OffsetSpec", "TimestampSpec", "parse_offsets",
           "parse_subscription", "parse_timestamps"]

EARLIEST = -2
"""In an offsets JSON, the partition's earliest offset (as in Spark's Kafka source)."""
LATEST = -1
"""In an offsets JSON, the partition's end offset."""
OffsetSpec = Literal["earliest", "latest"] | dict[str, dict[int, int]]
"""``"earliest"``, ``"latest"``, or per topic and partition an offset (or -2 / -1)."""
TimestampSpec = int | dict[str, dict[int, int]] | None
"""No timestamp bound, one timestamp (ms) for every partition, or one per partition."""

_SUBSCRIBE = ("assign", "subscribe", "subscribePattern")


def parse_subscription(opts: Mapping[str, str]
                       ) -> tuple[tuple[str, ...], str | None, dict[str, tuple[int, ...]] | None]:
    """(topics, pattern, assign) from exactly one of assign / subscribe / subscribePattern."""
    given = [name for name in _SUBSCRIBE if name.lower() in opts]
    if len(given) != 1:
        raise ConfigError(f"exactly one of the options {', '.join(_SUBSCRIBE)} is required; "
                          f"got {', '.join(given) or 'none'}")
    if given[0] == "subscribe":
        topics = tuple(t.strip() for t in opts["subscribe"].split(",") if t.strip())
        if not topics:
            raise ConfigError("option 'subscribe' is required (comma-separated topics)")
        return topics, None, None
    if given[0] == "subscribePattern":
        pattern = opts["subscribepattern"].strip()
        if not pattern:
            raise ConfigError("option 'subscribePattern' must not be empty")
        try:
            re.compile(pattern)
        except re.error as exc:
            raise ConfigError(f"option 'subscribePattern' is not a regular expression: "
                              f"{exc}") from None
        return (), pattern, None
    raw = opts["assign"]
    try:
        doc = json.loads(raw)
    except ValueError:
        doc = None
    if (not isinstance(doc, dict) or not doc or not all(
            isinstance(ps, list) and ps and all(type(p) is int and p >= 0 for p in ps)
            for ps in doc.values())):
        raise ConfigError(f"option 'assign' must be JSON such as {{\"topic\": [0, 1]}}; "
                          f"got {raw!r}")
    assign = {str(t): tuple(sorted(set(ps))) for t, ps in doc.items()}
    return tuple(assign), None, assign


def parse_timestamps(opts: Mapping[str, str], side: str, topics: tuple[str, ...] | None
                     ) -> TimestampSpec:
    """``<side>Timestamp`` (ms, every partition; it wins) or ``<side>OffsetsByTimestamp``
    (JSON ``{"topic": {"0": ms}}``)."""
    single = opts.get(f"{side}timestamp")
    if single is not None:
        try:
            value = int(single.strip())
        except ValueError:
            value = -1
        if value < 0:
            raise ConfigError(f"option '{side}Timestamp' must be milliseconds since the "
                              f"epoch (>= 0); got {single!r}")
        return value
    text = opts.get(f"{side}offsetsbytimestamp")
    if text is None:
        return None
    name = f"{side}OffsetsByTimestamp"
    spec = parse_offsets(text, name, topics)
    if not isinstance(spec, dict) or any(o < 0 for ps in spec.values() for o in ps.values()):
        raise ConfigError(f"{name} must be JSON such as {{\"topic\": {{\"0\": "
                          f"1700000000000}}}} with timestamps in ms (>= 0); got {text!r}")
    return spec


def parse_offsets(text: str, name: str, topics: tuple[str, ...] | None) -> OffsetSpec:
    """Parse ``earliest``, ``latest`` or ``{"topic": {"0": 12, "1": -2}}``.

    Partitions the JSON leaves out start at the earliest offset and end at the latest.

    Raises:
        ConfigError: not one of the forms above, or it names a topic not subscribed to
            (``topics`` None: any topic, as with subscribePattern).
    """
    stripped = text.strip()
    if stripped.lower() in ("earliest", "latest"):
        return "earliest" if stripped.lower() == "earliest" else "latest"
    try:
        doc = json.loads(stripped)
    except ValueError:
        doc = None
    if not isinstance(doc, dict):
        raise ConfigError(f"{name} must be earliest, latest or JSON such as "
                          f'{{"topic": {{"0": 12}}}}; got {text!r}')
    out: dict[str, dict[int, int]] = {}
    for topic, parts in doc.items():
        if topics is not None and topic not in topics:
            raise ConfigError(f"{name} names topic {topic!r}, which is not subscribed to")
        if not isinstance(parts, dict):
            raise ConfigError(f"{name}: the value for topic {topic!r} must be an object "
                              f"of partition -> offset")
        mapped: dict[int, int] = {}
        for part, offset in parts.items():
            try:
                p = int(part)
            except ValueError:
                raise ConfigError(f"{name}: partition {part!r} of {topic!r} is not a "
                                  f"number") from None
            if type(offset) is not int or offset < EARLIEST:
                raise ConfigError(f"{name}: offset {offset!r} for {topic}/{p} must be an "
                                  f"integer >= 0, or -2 (earliest) / -1 (latest)")
            mapped[p] = offset
        out[topic] = mapped
    return out
