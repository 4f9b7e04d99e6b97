"""The one option-table mechanism (``kontrakt._config``) behind the Kafka clients, the
Schema Registry client, the registry-bound serdes and the Spark data source: a bad value or
an unknown key gives the same typed error in all four (a ConfigError naming the option in
``.option`` and in its message, with the value shown), each in its component's words; one
TLS context builder serves Kafka and the registry; :func:`option_tables` lists them all."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from kontrakt._config import COMMON_OPTIONS, SECURITY_OPTIONS, ClientConfig
from kontrakt.clients.client import AsyncKafkaClient
from kontrakt.errors import ConfigError
from kontrakt.registry import MockSchemaRegistryClient, SchemaRegistryClient
from kontrakt.serde import AvroSerializer
from kontrakt.spark._options import parse_options

SCHEMA = json.dumps({"type": "record", "name": "R", "fields": [{"name": "a", "type": "int"}]})
KAFKA = {"bootstrap.servers": "127.0.0.1:9"}
SPARK = {"kafka.bootstrap.servers": "127.0.0.1:9", "subscribe": "t"}


def _kafka(extra: dict[str, Any]) -> Any:
    return ClientConfig({**COMMON_OPTIONS, **SECURITY_OPTIONS}, {**KAFKA, **extra})


def _registry(extra: dict[str, Any]) -> Any:
    return SchemaRegistryClient({"url": "http://127.0.0.1:9", **extra})


def _serde(extra: dict[str, Any]) -> Any:
    return AvroSerializer(MockSchemaRegistryClient({"url": "mock://tables"}), SCHEMA,
                          conf=extra)


def _spark(extra: dict[str, Any]) -> Any:
    return parse_options({**SPARK, **extra})


# (component, build, key as given, bad value, the option's declared name)
BAD_VALUES: list[tuple[str, Callable[[dict[str, Any]], Any], str, Any, str]] = [
    ("kafka client", _kafka, "request.timeout.ms", "soon", "request.timeout.ms"),
    ("registry client", _registry, "max.retries", "many", "max.retries"),
    ("serde", _serde, "normalize.schemas", "yes", "normalize.schemas"),
    ("spark", _spark, "minPartitions", "lots", "minPartitions"),
]


@pytest.mark.parametrize(("component", "build", "key", "value", "name"), BAD_VALUES,
                         ids=[c[0] for c in BAD_VALUES])
def test_a_bad_value_gives_the_same_typed_error_everywhere(
        component: str, build: Callable[[dict[str, Any]], Any], key: str, value: Any,
        name: str) -> None:
    with pytest.raises(ConfigError) as info:
        build({key: value})
    assert info.value.option == name
    assert key.lower() in str(info.value).lower()
    assert repr(value) in str(info.value)


UNKNOWN: list[tuple[str, Callable[[dict[str, Any]], Any], str, str]] = [
    ("kafka client", _kafka, "request.timeout.m", "'request.timeout.ms'"),
    ("registry client", _registry, "max.retry", "max.retries"),
    ("serde", _serde, "normalize.schema", "'normalize.schemas'"),
    ("spark", _spark, "minPartition", "minpartitions"),
]


@pytest.mark.parametrize(("component", "build", "key", "close"), UNKNOWN,
                         ids=[c[0] for c in UNKNOWN])
def test_an_unknown_key_names_close_matches_everywhere(
        component: str, build: Callable[[dict[str, Any]], Any], key: str, close: str) -> None:
    with pytest.raises(ConfigError) as info:
        build({key: "1"})
    # Spark hands the data source its options with lower-case keys.
    assert info.value.option is not None and info.value.option.lower() == key.lower()
    assert f"{info.value.option!r}" in str(info.value)
    assert f"did you mean {close}" in str(info.value)


def test_a_secret_value_is_never_in_the_error() -> None:
    with pytest.raises(ConfigError) as info:
        _kafka({"sasl.password": 98765})
    assert info.value.option == "sasl.password" and "98765" not in str(info.value)


@pytest.mark.parametrize("build", [
    lambda ca: AsyncKafkaClient({**KAFKA, "security.protocol": "SSL", "ssl.ca.location": ca}),
    lambda ca: SchemaRegistryClient({"url": "https://127.0.0.1:9", "ssl.ca.location": ca}),
], ids=["kafka", "registry"])
def test_kafka_and_registry_build_tls_contexts_alike(build: Callable[[str], Any],
                                                     tmp_path: Path) -> None:
    missing = str(tmp_path / "no-such-ca.pem")
    with pytest.raises(ConfigError) as info:
        build(missing)
    assert info.value.option == "ssl.ca.location"
    assert str(info.value).startswith(f"cannot load the TLS CA bundle ssl.ca.location="
                                      f"{missing!r}: ")


ROW_KEYS = {"name", "type", "default", "doc", "secret", "choices", "minimum", "maximum",
            "aliases"}


def test_option_tables_list_every_component_in_a_stable_shape() -> None:
    from kontrakt._config import option_tables  # the reference page's entry point

    tables = option_tables()
    for component in ("client", "producer", "consumer", "admin", "share consumer",
                      "schema registry client", "serializer", "deserializer", "spark"):
        assert tables[component], component
    json.dumps(tables)  # plain data, for the reference page generator
    for component, rows in tables.items():
        for row in rows:
            assert set(row) == ROW_KEYS, (component, row)
            assert isinstance(row["name"], str) and row["doc"], (component, row["name"])
            if row["secret"]:
                assert row["default"] is None
    client = {r["name"] for r in tables["client"]}
    for kafka_client in ("producer", "consumer", "admin", "share consumer"):
        assert client <= {r["name"] for r in tables[kafka_client]}
    by_name = {r["name"]: r for r in tables["producer"]}
    assert "queue.buffering.max.ms" in by_name["linger.ms"]["aliases"]
    assert by_name["sasl.password"]["secret"] is True
    registry = {r["name"]: r for r in tables["schema registry client"]}
    assert registry["basic.auth.user.info"]["secret"] is True
    assert registry["cache.capacity"] == {**registry["cache.capacity"], "default": 1000,
                                          "minimum": 1}
    spark = {r["name"]: r for r in tables["spark"]}
    assert spark["minPartitions"]["type"] == "int" and spark["mode"]["default"] == "FAILFAST"


def test_declared_aliases_and_bounds_work_in_both_parsers() -> None:
    from kontrakt._config import Option, OptionTable, options

    table = options(Option("fetch.size", "int", 10, minimum=1, maximum=100,
                           aliases=("fetch_bytes",), doc="d"))
    assert ClientConfig(table, {"fetch_bytes": "20"})["fetch.size"] == 20
    assert OptionTable("t", table).parse({"fetch_bytes": "30"}) == {"fetch.size": 30}
    for parse in (lambda v: ClientConfig(table, {"fetch.size": v}),
                  lambda v: OptionTable("t", table).parse({"fetch.size": v})):
        with pytest.raises(ConfigError, match=r"fetch\.size must be <= 100, got 101") as info:
            parse(101)
        assert info.value.option == "fetch.size"
