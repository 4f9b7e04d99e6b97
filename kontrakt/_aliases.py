"""Other clients' names for Kontrakt's options: librdkafka's (confluent-kafka), the Java
client's and kafka-python's / aiokafka's keywords.

:data:`ALIASES` maps such a name either to the Kontrakt option with the same meaning
(:class:`Alias`, with a value conversion where the units differ) or to a :class:`Refusal`
saying why there is no equivalent and what to use instead. :class:`~kontrakt._config.ClientConfig`
consults it only for keys the client does not know itself, so a client's own option always
wins; an alias of an option the client does not have (``message.timeout.ms`` given to a
consumer) is refused as unknown, naming what it stands for.

The migration guides (``docs/migrating-from-*.md``) list these names; a test checks that
each listed Kontrakt name exists and each refusal fails as stated.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from kontrakt.errors import ConfigError

__all__ = ["ALIASES", "Alias", "Refusal", "resolve_alias"]


@dataclass(frozen=True, slots=True)
class Alias:
    """Another client's name for a Kontrakt option.

    Attributes:
        name: the Kontrakt option (Kafka property name).
        peers: who uses the alias (``librdkafka``, ``Java``, ``kafka-python``, ``aiokafka``).
        convert: turns the peer's value into the option's, when units or spellings differ.
    """

    name: str
    peers: str
    convert: Callable[[Any], Any] | None = None


@dataclass(frozen=True, slots=True)
class Refusal:
    """A peer's option with no Kontrakt equivalent.

    Attributes:
        reason: why, and what to do instead (part of the ConfigError's message).
        peers: who uses the name.
        accepts: values that mean what Kontrakt does anyway (accepted and ignored), e.g.
            ``enable.partition.eof=false``.
    """

    reason: str
    peers: str
    accepts: tuple[Any, ...] = ()


def _kbytes(value: Any) -> Any:
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise ConfigError(f"queue.buffering.max.kbytes must be an integer, got {value!r}")
    try:
        return int(value) * 1024
    except ValueError:
        raise ConfigError(
            f"queue.buffering.max.kbytes must be an integer, got {value!r}") from None


def _check_hostname(value: Any) -> Any:
    if isinstance(value, bool):
        return "https" if value else "none"
    raise ConfigError(f"ssl_check_hostname must be True or False, got {value!r}")


_RDK, _JAVA, _KP, _AIO = "librdkafka", "Java", "kafka-python", "aiokafka"
_KP_AIO = "kafka-python, aiokafka"

_DESERIALIZER = ("a plain Consumer returns bytes; use DeserializingConsumer(value_deserializer="
                 "...) (DeserializingShareConsumer for a share consumer) with a "
                 "kontrakt.serde Deserializer (called as de(data, ctx)), or decode "
                 "record.value yourself")
_SERIALIZER = ("a plain Producer sends bytes; use SerializingProducer(value_serializer=...) "
               "with a kontrakt.serde Serializer (called as ser(obj, ctx)), or encode the "
               "value yourself")

ALIASES: dict[str, Alias | Refusal] = {
    # librdkafka (confluent-kafka) names
    "message.timeout.ms": Alias("delivery.timeout.ms", _RDK),
    "queue.buffering.max.ms": Alias("linger.ms", _RDK),
    "queue.buffering.max.kbytes": Alias("buffer.memory", _RDK, _kbytes),
    "message.send.max.retries": Alias("retries", _RDK),
    "request.required.acks": Alias("acks", _RDK),
    "compression.codec": Alias("compression.type", _RDK),
    "sasl.mechanisms": Alias("sasl.mechanism", _RDK),
    "socket.timeout.ms": Alias("request.timeout.ms", _RDK),
    "topic.metadata.refresh.interval.ms": Alias("metadata.max.age.ms", _RDK),
    "fetch.wait.max.ms": Alias("fetch.max.wait.ms", _RDK),
    "fetch.message.max.bytes": Alias("max.partition.fetch.bytes", _RDK),
    "auto.commit.enable": Alias("enable.auto.commit", _RDK),
    "queue.buffering.max.messages": Refusal(
        "Kontrakt bounds the producer's buffer in bytes, not records: use buffer.memory",
        _RDK),
    "batch.num.messages": Refusal(
        "Kontrakt bounds a batch in bytes, not records: use batch.size", _RDK),
    "queued.min.messages": Refusal(
        "Kontrakt bounds prefetched records in bytes, not records: use "
        "queued.max.messages.kbytes", _RDK),
    "enable.partition.eof": Refusal(
        "Kontrakt's poll() never returns partition-EOF events; to see the end, compare "
        "consumer.position(tp) with consumer.highwater(tp), or read consumer.lag(tp)",
        _RDK, accepts=(False, "false")),
    "debug": Refusal(
        "Kontrakt logs with the logging module: logging.getLogger('kontrakt')"
        ".setLevel(logging.DEBUG) shows what debug=all would", _RDK),
    "log.connection.close": Refusal(
        "Kontrakt logs closed connections only at DEBUG", _RDK,
        accepts=(True, False, "true", "false")),
    "log_level": Refusal(
        "Kontrakt logs with the logging module: set the level of "
        "logging.getLogger('kontrakt')", _RDK),
    "socket.keepalive.enable": Refusal(
        "Kontrakt does not set TCP keepalive; idle connections are closed after "
        "connections.max.idle.ms", _RDK),
    "enable.ssl.certificate.verification": Refusal(
        "to turn certificate checks off, pass an ssl.SSLContext built that way as "
        "ssl.context", _RDK, accepts=(True, "true")),
    "on_commit": Refusal(
        "commit results come back from commit() (raises) or commit_async(callback=cb), "
        "where cb(offsets, error) runs per commit", _RDK),
    "throttle_cb": Refusal("Kontrakt does not report broker throttling to callbacks", _RDK),
    # Java client names
    "max.request.size": Alias("message.max.bytes", _JAVA),
    "default.api.timeout.ms": Refusal(
        "each blocking call takes its own timeout= (default request.timeout.ms)", _JAVA),
    "key.deserializer": Refusal(_DESERIALIZER, _JAVA),
    "value.deserializer": Refusal(_DESERIALIZER, _JAVA),
    "key.serializer": Refusal(_SERIALIZER, _JAVA),
    "value.serializer": Refusal(_SERIALIZER, _JAVA),
    "sasl.jaas.config": Refusal(
        "give the credentials as sasl.username and sasl.password", _JAVA),
    "ssl.truststore.location": Refusal(
        "Kontrakt reads PEM files, not JKS/PKCS12 stores: use ssl.ca.location", _JAVA),
    "ssl.keystore.location": Refusal(
        "Kontrakt reads PEM files, not JKS/PKCS12 stores: use ssl.certificate.location "
        "and ssl.key.location", _JAVA),
    # kafka-python / aiokafka keywords (the snake_case forms of Kontrakt's own options,
    # bootstrap_servers=, group_id=, ..., need no entry)
    "max_request_size": Alias("message.max.bytes", _KP_AIO),
    "sasl_plain_username": Alias("sasl.username", _KP_AIO),
    "sasl_plain_password": Alias("sasl.password", _KP_AIO),
    "ssl_cafile": Alias("ssl.ca.location", _KP_AIO),
    "ssl_certfile": Alias("ssl.certificate.location", _KP_AIO),
    "ssl_keyfile": Alias("ssl.key.location", _KP_AIO),
    "ssl_password": Alias("ssl.key.password", _KP_AIO),
    "ssl_check_hostname": Alias("ssl.endpoint.identification.algorithm", _KP_AIO,
                                _check_hostname),
    "api_version": Refusal(
        "Kontrakt always negotiates API versions with the broker (ApiVersions); drop it",
        _KP_AIO, accepts=("auto", None)),
    "consumer_timeout_ms": Refusal(
        "iterating a Kontrakt consumer waits for records and never stops by itself; use "
        "poll(timeout) or getmany(timeout) to stop after a quiet period", _KP_AIO),
    "loop": Refusal("AsyncConsumer and AsyncProducer use the running event loop", _AIO),
}


def _snake(name: str) -> str:
    return name.replace(".", "_").replace("-", "_")


# A peer's dotted name may also come as a keyword (message_timeout_ms=...).
_BY_KEY: dict[str, Alias | Refusal] = {**{_snake(k): v for k, v in ALIASES.items()},
                                       **ALIASES}


def resolve_alias(key: str, value: Any, allowed: Mapping[str, Any]
                  ) -> tuple[str, Any] | bool | None:
    """What a key this client does not know means.

    Args:
        key: the key as given (a property name or a keyword).
        value: its value.
        allowed: the client's options by property name.

    Returns:
        ``(option name, converted value)`` for an alias of one of the client's options;
        None for a refused name given a value that means what Kontrakt does anyway (to be
        ignored); False when the key is no known alias (the caller reports it unknown).

    Raises:
        ConfigError: a refused name (the message says why and what to use), or an alias
            of an option this client does not have.
    """
    entry = _BY_KEY.get(key)
    if entry is None:
        return False
    if isinstance(entry, Refusal):
        if entry.accepts and any(value == ok and type(value) is type(ok)
                                 for ok in entry.accepts):
            return None
        raise ConfigError(f"{key} ({entry.peers}) is not supported: {entry.reason}")
    if entry.name not in allowed:
        raise ConfigError(f"{key} is {entry.peers}'s name for {entry.name}, which this "
                          f"client does not have")
    return entry.name, (entry.convert(value) if entry.convert is not None else value)
