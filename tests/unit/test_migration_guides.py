"""The migration guides' tables (docs/migrating-from-*.md) state facts; this checks each row.

A row is ``| peer name | Kontrakt | notes |``. The middle column is one of:
- backquoted Kontrakt names: an attribute path (``Consumer.poll``, ``kontrakt.errors.X``,
  ``compat.Message.value`` for kontrakt.compat.confluent_kafka) that must resolve, or a
  lowercase configuration key that a consumer or producer must have. When the peer column is a
  configuration key with a value (``message.timeout.ms=120000``), the client given it must set
  the named option (an alias).
- ``accepted and ignored``: a client given the peer's key and value builds.
- ``fails with `Error```: the peer's call (evaluated against the objects below) or
  configuration key fails at once with that error, whose message contains every backquoted
  name of the notes column (the Kontrakt equivalent it names).
"""

from __future__ import annotations

import importlib
import re
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import kontrakt
from kontrakt import errors
from kontrakt._config import ClientConfig
from kontrakt._types import ConsumerRecord, TimestampType, TopicPartition
from kontrakt.clients.consumer import AsyncConsumer, Consumer
from kontrakt.clients.consumer._config import CONSUMER_OPTIONS
from kontrakt.clients.producer import AsyncProducer
from kontrakt.clients.producer._config import PRODUCER_OPTIONS

DOCS = sorted((Path(__file__).parents[2] / "docs").glob("migrating-from-*.md"))
PEERS = {"confluent-kafka", "aiokafka", "kafka-python"}
TICKS = re.compile(r"`([^`]+)`")
NOWHERE = "127.0.0.1:1"


def _rows(path: Path) -> Iterator[tuple[int, str, str, str]]:
    header = True
    for n, line in enumerate(path.read_text().splitlines(), 1):
        if not line.startswith("|"):
            header = True
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if header:
            header = False
            continue
        if set(cells[0]) <= set("-: "):
            continue
        assert len(cells) == 3, f"{path.name}:{n}: a row has three columns"
        yield n, cells[0], cells[1], cells[2]


ROWS = [pytest.param(p, n, a, b, c, id=f"{p.name}:{n}") for p in DOCS
        for n, a, b, c in _rows(p)]


def test_there_is_a_guide_per_peer_with_rows() -> None:
    assert {p.stem.removeprefix("migrating-from-") for p in DOCS} == PEERS
    for p in DOCS:
        assert sum(1 for _ in _rows(p)) >= 10, p.name


def _resolve(name: str) -> Any:
    if name.startswith("compat."):
        name = "kontrakt.compat.confluent_kafka." + name.removeprefix("compat.")
    parts = name.split(".")
    obj: Any = kontrakt
    if parts[0] == "kontrakt":
        for i in range(len(parts), 0, -1):
            try:
                obj = importlib.import_module(".".join(parts[:i]))
            except ImportError:
                continue
            parts = parts[i:]
            break
    for part in parts:
        obj = getattr(obj, part)
    return obj


def _is_key(name: str) -> bool:
    return re.fullmatch(r"[a-z][a-z0-9_.]*", name) is not None


def _key_and_value(cell: str) -> tuple[str, Any] | None:
    """``key=value`` or ``key`` of a configuration row; None for a call."""
    found = TICKS.fullmatch(cell)
    if found is None or "(" in found.group(1) or " " in found.group(1):
        return None
    key, _, value = found.group(1).partition("=")
    if not _is_key(key):
        return None
    return key, (int(value) if value.isdigit() else value) if value else None


class _Objects(dict[str, Any]):
    """What the "fails with" calls are evaluated against, made on first use."""

    def __init__(self) -> None:
        super().__init__(TopicPartition=TopicPartition, AsyncProducer=AsyncProducer,
                         AsyncConsumer=AsyncConsumer, Consumer=Consumer,
                         tp=TopicPartition("t", 0))
        self.closers: list[Any] = []

    def __missing__(self, name: str) -> Any:
        if name == "consumer":
            value: Any = Consumer(bootstrap_servers=NOWHERE, group_id="g")
        elif name == "subscribed":
            value = Consumer(bootstrap_servers=NOWHERE, group_id="g")
            value.subscribe(["t"])
        elif name == "record":
            return ConsumerRecord("t", 0, 5, 0, TimestampType.CREATE_TIME, b"k", b"v")
        else:
            raise KeyError(name)
        self.closers.append(value)
        self[name] = value
        return value


@pytest.fixture(scope="module")
def objects() -> Iterator[_Objects]:
    made = _Objects()
    yield made
    for c in made.closers:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            c.close(timeout=0)


def _config_error(key: str, value: Any) -> list[BaseException]:
    raised = []
    for opts in (CONSUMER_OPTIONS, PRODUCER_OPTIONS):
        try:
            ClientConfig(opts, {key: value})
        except errors.ConfigError as exc:
            raised.append(exc)
    return raised


@pytest.mark.parametrize(("path", "line", "peer", "ours", "notes"), ROWS)
def test_a_guide_row_holds(path: Path, line: int, peer: str, ours: str, notes: str,
                           objects: _Objects) -> None:
    config = _key_and_value(peer)
    if ours.startswith("fails with"):
        (name,) = TICKS.findall(ours)
        error = getattr(errors, name, None) or getattr(__builtins__, name, None) \
            or __builtins__[name]  # type: ignore[index]
        wanted = TICKS.findall(notes)
        if config is not None:
            raised = _config_error(*config)
            assert raised, f"{peer} is accepted"
            message = str(raised[0])
            assert all(isinstance(e, error) for e in raised)
        else:
            with pytest.raises(error) as info:
                eval(TICKS.fullmatch(peer).group(1), {}, objects)  # type: ignore[union-attr]
            message = str(info.value)
        for w in wanted:
            assert w in message, f"{w!r} not in {message!r}"
        return
    if ours == "accepted and ignored":
        assert config is not None
        ClientConfig(CONSUMER_OPTIONS, {config[0]: config[1]})
        ClientConfig(PRODUCER_OPTIONS, {config[0]: config[1]})
        return
    names = TICKS.findall(ours)
    assert names, f"row {line}: no Kontrakt name"
    for name in names:
        if _is_key(name):
            assert name in CONSUMER_OPTIONS or name in PRODUCER_OPTIONS, name
        else:
            _resolve(name)
    if config is not None and config[1] is not None and config[0] != names[0]:
        target = names[0]
        opts = PRODUCER_OPTIONS if target not in CONSUMER_OPTIONS else CONSUMER_OPTIONS
        cfg = ClientConfig(opts, {config[0]: config[1]})
        assert cfg[target] is not None and cfg[target] != opts[target].default, (
            f"{config[0]} did not set {target}")
