"""Producer options and their validation (one place for both producers)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from kontrakt._config import ClientConfig, Option, options
from kontrakt.clients._hooks import HOOK_OPTIONS
from kontrakt.clients.client import CLIENT_OPTIONS
from kontrakt.errors import ConfigError
from kontrakt.protocol.records import CompressionType

__all__ = ["PRODUCER_OPTIONS", "ProducerSettings", "parse_producer_config"]

_CODECS = ("none", "gzip", "snappy", "lz4", "zstd")

PRODUCER_OPTIONS: dict[str, Option] = {
    **CLIENT_OPTIONS,
    **options(
        Option("acks", "any", "all",
               doc="0: no acknowledgement, 1: the leader's, all/-1: every in-sync replica's"),
        # Eight times the Java client's 16384 (librdkafka's is 1000000): a batch costs a
        # pure-Python client tens of microseconds to frame, compress, send and complete, a
        # fourth of the time per record at 16 KiB of 100-byte records; 128 KiB measured
        # faster than 64 KiB for every codec (benchmarks/README.md).
        Option("batch.size", "int", 131072, minimum=1,
               doc="largest uncompressed batch per partition, in bytes"),
        Option("linger.ms", "int", 5, minimum=0,
               doc="how long a partition's batch waits for more records before it is sent; "
                   "also how long a full batch may wait for a request in flight to its "
                   "broker, to share the next request (0: send full batches at once)"),
        Option("buffer.memory", "int", 32 * 1024 * 1024, minimum=1024,
               doc="bytes of records waiting to be sent before send() blocks"),
        Option("max.block.ms", "int", 60000, minimum=0,
               doc="how long send() may block on metadata or a full buffer"),
        Option("retries", "int", 2147483647, minimum=0,
               doc="how many times a batch is resent after a retriable error"),
        Option("delivery.timeout.ms", "int", 120000, minimum=1,
               doc="upper bound on the time from send() to success or failure, counted "
                   "from the creation of the record's batch (its first record's send); "
                   "records not delivered by then fail with DeliveryTimeoutError, not "
                   "sooner, whatever holds them up (a request in flight is not waited "
                   "for past it)"),
        Option("compression.type", "str", "none", choices=_CODECS,
               doc="codec of the produced batches"),
        Option("compression.level", "int", None,
               doc="codec level; unset uses the codec's default"),
        Option("message.max.bytes", "int", 1048576, minimum=128,
               doc="largest batch (and produce request) sent; larger records are rejected. "
                   "A batch the broker refuses as too large (MESSAGE_TOO_LARGE) is split "
                   "in halves and resent; a record it refuses alone fails with "
                   "RecordTooLargeError"),
        Option("enable.idempotence", "bool", None,
               doc="exactly-once per partition (default on; needs acks=all, <= 5 in flight)"),
        Option("partitioner", "any", "default",
               doc="'default' (murmur2 keys, sticky null keys), 'murmur2_random', "
                   "'round_robin', or a callable (key, all_partitions, available)"),
        Option("transactional.id", "str", None,
               doc="makes the producer transactional (begin/commit/abort_transaction)"),
        Option("transaction.timeout.ms", "int", 60000, minimum=1,
               doc="how long the coordinator lets a transaction stay open"),
        Option("on_delivery", "any",
               doc="Producer only: cb(err, metadata) for each produce() call given no "
                   "on_delivery of its own (confluent-kafka's config callback); run by "
                   "poll() / flush() / close()"),
    ),
    **HOOK_OPTIONS,
}


@dataclass(frozen=True, slots=True)
class ProducerSettings:
    """The producer options after validation, in the units the code uses (seconds)."""

    acks: int
    batch_size: int
    linger: float
    buffer_memory: int
    max_block: float
    retries: int
    retry_backoff: float
    retry_backoff_max: float
    delivery_timeout: float
    request_timeout: float
    compression: CompressionType
    compression_level: int | None
    message_max_bytes: int
    idempotent: bool
    max_in_flight: int
    partitioner: str | Callable[..., int]
    transactional_id: str | None = None


def _acks(value: Any) -> int:
    if isinstance(value, bool):
        raise ConfigError(f"acks must be 0, 1 or 'all' (-1), got {value!r}")
    if isinstance(value, str):
        text = value.strip().lower()
        if text == "all":
            return -1
        try:
            value = int(text)
        except ValueError:
            raise ConfigError(f"acks must be 0, 1 or 'all' (-1), got {value!r}") from None
    if value in (0, 1, -1):
        return int(value)
    raise ConfigError(f"acks must be 0, 1 or 'all' (-1), got {value!r}")


def parse_producer_config(config: Mapping[str, Any] | None,
                          kwargs: Mapping[str, Any]) -> tuple[ClientConfig, ProducerSettings]:
    """Validate a producer configuration.

    Idempotence follows the Java client: on by default; when it was not asked for
    explicitly and ``acks`` or ``max.in.flight.requests.per.connection`` rule it out, it is
    turned off; when it was asked for explicitly, such a conflict is a ConfigError.

    Returns:
        The validated config (every option) and the derived settings.

    Raises:
        ConfigError: unknown key, bad value, or conflicting options.
    """
    cfg = ClientConfig(PRODUCER_OPTIONS, config, **kwargs)
    cfg.require("bootstrap.servers")
    acks = _acks(cfg["acks"])
    in_flight = cfg["max.in.flight.requests.per.connection"]
    asked = cfg["enable.idempotence"]
    conflicts = []
    if acks != -1:
        conflicts.append(f"acks={acks} (needs all)")
    if in_flight > 5:
        conflicts.append(f"max.in.flight.requests.per.connection={in_flight} (needs <= 5)")
    txn_id = cfg["transactional.id"]
    if txn_id is not None:
        if asked is False:
            raise ConfigError("transactional.id needs enable.idempotence (leave it unset)")
        asked = True
    if asked and conflicts:
        raise ConfigError(("transactional.id" if txn_id is not None else "enable.idempotence=true")
                          + " conflicts with " + ", ".join(conflicts))
    idempotent = bool(asked if asked is not None else not conflicts)
    linger = cfg["linger.ms"] / 1000
    request_timeout = cfg["request.timeout.ms"] / 1000
    delivery = cfg["delivery.timeout.ms"] / 1000
    if delivery < linger + request_timeout:
        raise ConfigError(
            f"delivery.timeout.ms ({cfg['delivery.timeout.ms']}) must be at least linger.ms + "
            f"request.timeout.ms ({cfg['linger.ms'] + cfg['request.timeout.ms']})")
    part = cfg["partitioner"]
    if isinstance(part, str):
        part = part.strip().lower()
        if part not in ("default", "murmur2_random", "round_robin"):
            raise ConfigError(
                f"partitioner must be 'default', 'murmur2_random', 'round_robin' "
                f"or a callable, got {part!r}")
    elif not callable(part):
        raise ConfigError(f"partitioner must be a name or a callable, got {part!r}")
    codec = CompressionType.from_name(cfg["compression.type"])
    settings = ProducerSettings(
        acks=acks,
        batch_size=cfg["batch.size"],
        linger=linger,
        buffer_memory=cfg["buffer.memory"],
        max_block=cfg["max.block.ms"] / 1000,
        retries=cfg["retries"],
        retry_backoff=cfg["retry.backoff.ms"] / 1000,
        retry_backoff_max=max(cfg["retry.backoff.ms"], cfg["retry.backoff.max.ms"]) / 1000,
        delivery_timeout=delivery,
        request_timeout=request_timeout,
        compression=codec,
        compression_level=cfg["compression.level"],
        message_max_bytes=cfg["message.max.bytes"],
        idempotent=idempotent,
        max_in_flight=in_flight,
        partitioner=part,
        transactional_id=txn_id,
    )
    return cfg, settings

