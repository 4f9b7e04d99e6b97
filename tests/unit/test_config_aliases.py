"""Other clients' configuration names (kontrakt._aliases): an alias sets the Kontrakt option
with the same meaning (converting units), a name without an equivalent fails at once saying
why and what to use, and the callbacks' options are checked when the client is built."""

from __future__ import annotations

import logging

import pytest

from kontrakt._aliases import ALIASES, Alias, Refusal
from kontrakt._config import ClientConfig
from kontrakt.clients.consumer import AsyncConsumer, Consumer
from kontrakt.clients.consumer._config import CONSUMER_OPTIONS
from kontrakt.clients.producer import AsyncProducer
from kontrakt.clients.producer._config import PRODUCER_OPTIONS, parse_producer_config
from kontrakt.errors import ConfigError

BS = "127.0.0.1:1"


@pytest.mark.parametrize(("key", "value", "option", "expected"), [
    ("message.timeout.ms", 90000, "delivery.timeout.ms", 90000),
    ("queue.buffering.max.ms", "7", "linger.ms", 7),
    ("queue.buffering.max.kbytes", 2048, "buffer.memory", 2048 * 1024),
    ("compression.codec", "lz4", "compression.type", "lz4"),
    ("request.required.acks", "1", "acks", "1"),
    ("sasl.mechanisms", "SCRAM-SHA-256", "sasl.mechanism", "SCRAM-SHA-256"),
    ("message.timeout.ms", 90000, "delivery.timeout.ms", 90000),  # as a keyword
    ("max_request_size", 2_000_000, "message.max.bytes", 2_000_000),
    ("ssl_cafile", "/ca.pem", "ssl.ca.location", "/ca.pem"),
    ("ssl_check_hostname", False, "ssl.endpoint.identification.algorithm", "none"),
    ("sasl_plain_password", "pw", "sasl.password", "pw"),
])
def test_a_producer_alias_sets_the_kontrakt_option(key: str, value: object, option: str,
                                                   expected: object) -> None:
    cfg, _ = parse_producer_config({"bootstrap.servers": BS, key: value}, {})
    assert cfg[option] == expected


@pytest.mark.parametrize(("key", "value", "option", "expected"), [
    ("fetch.wait.max.ms", 100, "fetch.max.wait.ms", 100),
    ("fetch.message.max.bytes", 65536, "max.partition.fetch.bytes", 65536),
    ("auto.commit.enable", "false", "enable.auto.commit", False),
    ("topic.metadata.refresh.interval.ms", 1000, "metadata.max.age.ms", 1000),
    ("socket.timeout.ms", 5000, "request.timeout.ms", 5000),
])
def test_a_consumer_alias_sets_the_kontrakt_option(key: str, value: object, option: str,
                                                   expected: object) -> None:
    assert ClientConfig(CONSUMER_OPTIONS, {key: value})[option] == expected
    assert ClientConfig(CONSUMER_OPTIONS, **{key.replace(".", "_"): value})[option] == expected


@pytest.mark.parametrize(("key", "value", "hint"), [
    ("queue.buffering.max.messages", 100000, "buffer.memory"),
    ("batch.num.messages", 1000, "batch.size"),
    ("debug", "all", "logging.getLogger('kontrakt')"),
    ("value.serializer", "x", "SerializingProducer"),
    ("sasl.jaas.config", "x", "sasl.username"),
    ("api_version", (2, 0), "negotiates"),
])
def test_a_producer_name_without_an_equivalent_fails_saying_what_to_use(
        key: str, value: object, hint: str) -> None:
    with pytest.raises(ConfigError, match="not supported") as info:
        parse_producer_config({"bootstrap.servers": BS, key: value}, {})
    assert hint in str(info.value) and key in str(info.value)


@pytest.mark.parametrize(("key", "value", "hint"), [
    ("enable.partition.eof", True, "highwater"),
    ("queued.min.messages", 10, "queued.max.messages.kbytes"),
    ("value_deserializer", lambda b: b, "DeserializingConsumer"),
    ("consumer_timeout_ms", 1000, "poll(timeout)"),
    ("default.api.timeout.ms", 1000, "timeout="),
    ("on_commit", print, "commit_async(callback=cb)"),
])
def test_a_consumer_name_without_an_equivalent_fails_saying_what_to_use(
        key: str, value: object, hint: str) -> None:
    with pytest.raises(ConfigError, match="not supported") as info:
        Consumer(bootstrap_servers=BS, **{key: value})
    assert hint in str(info.value)


def test_values_meaning_what_kontrakt_does_anyway_are_accepted() -> None:
    cfg = ClientConfig(CONSUMER_OPTIONS, {"enable.partition.eof": False,
                                          "api_version": "auto"})
    assert "enable.partition.eof" not in cfg
    with pytest.raises(ConfigError, match=r"enable.partition.eof"):
        ClientConfig(CONSUMER_OPTIONS, {"enable.partition.eof": "true"})


def test_an_alias_of_another_clients_option_names_it() -> None:
    with pytest.raises(ConfigError, match=r"message.timeout.ms is librdkafka's name for "
                                          r"delivery.timeout.ms"):
        ClientConfig(CONSUMER_OPTIONS, {"message.timeout.ms": 1000})


def test_an_unknown_key_still_names_close_matches() -> None:
    with pytest.raises(ConfigError, match=r"did you mean 'linger.ms'"):
        ClientConfig(PRODUCER_OPTIONS, {"linger.msx": 1})


def test_a_secret_given_by_alias_is_not_echoed() -> None:
    with pytest.raises(ConfigError) as info:
        ClientConfig(PRODUCER_OPTIONS, sasl_plain_password=12345678)
    assert "12345678" not in str(info.value)


def test_every_alias_points_at_an_option_and_every_refusal_says_why() -> None:
    every = {**CONSUMER_OPTIONS, **PRODUCER_OPTIONS}
    for key, entry in ALIASES.items():
        assert key not in every, f"{key} is a Kontrakt option itself"
        if isinstance(entry, Alias):
            assert entry.name in every, key
        else:
            assert isinstance(entry, Refusal) and len(entry.reason) > 20, key


def test_callback_options_are_checked_when_the_client_is_built() -> None:
    with pytest.raises(ConfigError, match="error_cb must be callable"):
        Consumer(bootstrap_servers=BS, error_cb="print")
    with pytest.raises(ConfigError, match=r"logging.Logger"):
        AsyncConsumer(bootstrap_servers=BS, logger=print)
    with pytest.raises(ConfigError, match=r"stats_cb and statistics.interval.ms"):
        AsyncConsumer(bootstrap_servers=BS, stats_cb=print)
    with pytest.raises(ConfigError, match="AsyncProducer"):
        AsyncProducer(bootstrap_servers=BS, on_delivery=print)
    AsyncConsumer(bootstrap_servers=BS, logger=logging.getLogger("app"), error_cb=print,
                  stats_cb=print, statistics_interval_ms=1000)
