"""Every sync/async pair of public classes has the same public methods with the same
parameters (names, kinds, defaults), except the differences listed in ALLOWED, each with its
reason.

The pairs are found, not listed: every ``X`` / ``AsyncX`` pair in the ``__all__`` of kontrakt,
kontrakt.clients, kontrakt.registry and kontrakt.serde (the serde pairs need their extras).
A deserializing consumer is also compared with its consumer: it must offer every consumer
method with the same parameters.
"""

from __future__ import annotations

import importlib
import inspect
from typing import Any

import pytest

MODULES = ["kontrakt", "kontrakt.clients", "kontrakt.registry", "kontrakt.serde"]

#: (class name, member) -> why the member is on one side only or differs in parameters.
#: Names are those of the sync class of the pair.
ALLOWED: dict[tuple[str, str], str] = {
    # Lifecycle: a sync client starts in the background when made (its first blocking call
    # waits for it); an async one is started by ``await start()`` or ``async with``.
    **{(c, "start"): "sync clients start themselves; async ones are awaited"
       for c in ("Producer", "Consumer", "AdminClient", "KafkaClient", "SerializingProducer",
                 "DeserializingConsumer")},
    ("Producer", "start_budget"): "the seconds AsyncProducer.start may take: the sync "
                                  "Producer bounds its background start with it",
    # confluent-kafka's blocking API, which has no asyncio counterpart.
    ("Producer", "produce"): "confluent-kafka's produce(..., on_delivery): callbacks run on "
                             "the caller's thread in poll()/flush(); async code awaits send()",
    ("Producer", "poll"): "runs produce()'s delivery callbacks on the caller's thread",
    ("SerializingProducer", "produce"): "as Producer's",
    ("SerializingProducer", "poll"): "as Producer's",
    ("Producer", "purge"): "blocking=: confluent-kafka's wait for purged in-flight "
                           "requests on the calling thread; AsyncProducer.purge returns the "
                           "count at once",
    ("SerializingProducer", "purge"): "as Producer's",
    ("Consumer", "unsubscribe"): "timeout=: the sync unsubscribe() waits for the hand-back "
                                 "(its revoke listener runs on the caller's thread, as in "
                                 "the Java client); AsyncConsumer.unsubscribe() returns at "
                                 "once and hands back in the background",
    ("DeserializingConsumer", "unsubscribe"): "as Consumer's",
    # Loop-bound objects: usable only on the client's event loop, which a sync client
    # runs in its own thread.
    ("Consumer", "client"): "the AsyncKafkaClient lives on the consumer's loop thread",
    ("DeserializingConsumer", "client"): "as Consumer's",
    ("AdminClient", "client"): "the AsyncKafkaClient lives on the admin client's loop thread",
    ("KafkaClient", "connection"): "returns a loop-bound BrokerConnection",
    ("KafkaClient", "broker"): "returns a loop-bound BrokerConnection",
    ("KafkaClient", "coordinator_connection"): "returns a loop-bound BrokerConnection",
    ("KafkaClient", "add_topics"): "metadata plumbing of the clients built on the core; "
                                   "refresh_metadata(topics) is the public way",
    ("KafkaClient", "track_all_topics"): "metadata plumbing (pattern subscriptions)",
    ("KafkaClient", "request_metadata_refresh"): "metadata plumbing (wakes the loop's "
                                                 "refresher); refresh_metadata is public",
    ("KafkaClient", "forget_coordinator"): "coordinator-cache plumbing of the group and "
                                           "transaction code",
    ("KafkaClient", "least_loaded_node"): "routing plumbing; request() routes by itself",
    ("KafkaClient", "connect_failure"): "connection plumbing of the producer's sender (the "
                                        "cause of a batch that waited out a backoff)",
    ("KafkaClient", "request_with_retries"): "retry plumbing of the clients built on the "
                                             "core; request() is the public call",
    # Attributes the async forms set in __init__ (not class members), the sync forms expose
    # as properties.
    ("Consumer", "config"): "AsyncConsumer.config is an instance attribute",
    ("DeserializingConsumer", "config"): "as Consumer's",
    ("ShareConsumer", "config"): "AsyncShareConsumer.config is an instance attribute",
    ("DeserializingShareConsumer", "config"): "as ShareConsumer's",
    ("KafkaClient", "cluster"): "AsyncKafkaClient.cluster is an instance attribute",
}


def _public_classes() -> dict[str, type]:
    found: dict[str, type] = {}
    for name in MODULES:
        module = importlib.import_module(name)
        for attr in module.__all__:
            try:
                value = getattr(module, attr)
            except ImportError:  # a serde whose extra is not installed
                continue
            if isinstance(value, type):
                found.setdefault(attr, value)
    return found


def _pairs() -> list[tuple[type, type]]:
    classes = _public_classes()
    return sorted(((cls, classes["Async" + name]) for name, cls in classes.items()
                   if "Async" + name in classes), key=lambda p: p[0].__name__)


#: Dunder members compared too: the constructor, and a serde's call.
_DUNDERS = ("__init__", "__call__")


def _members(cls: type) -> dict[str, Any]:
    return {name: value for name, value in inspect.getmembers(cls)
            if (not name.startswith("_") or name in _DUNDERS) and not isinstance(value, type)}


def _params(fn: Any) -> list[tuple[str, Any, Any]] | None:
    if isinstance(fn, property) or not callable(fn):
        return None
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return None
    # Underscored parameters are private plumbing (the sync Consumer hands its AsyncConsumer
    # a listener runner), not part of the API.
    return [(p.name, p.kind, p.default) for p in sig.parameters.values()
            if not p.name.startswith("_")]


def _differences(sync: type, other: type) -> dict[str, str]:
    """member -> how ``other`` differs from ``sync``."""
    a, b = _members(sync), _members(other)
    out = {name: f"only on {sync.__name__}" for name in a.keys() - b.keys()}
    out |= {name: f"only on {other.__name__}" for name in b.keys() - a.keys()}
    for name in a.keys() & b.keys():
        pa, pb = _params(a[name]), _params(b[name])
        if pa != pb:
            out[name] = f"parameters differ: {pa} vs {pb}"
    return out


PAIRS = _pairs()


def test_the_pairs_are_found() -> None:
    names = {s.__name__ for s, _ in PAIRS}
    assert {"Producer", "Consumer", "AdminClient", "KafkaClient", "SchemaRegistryClient",
            "SerializingProducer", "DeserializingConsumer"} <= names


@pytest.mark.parametrize(("sync", "other"), PAIRS, ids=[s.__name__ for s, _ in PAIRS])
def test_sync_and_async_forms_have_the_same_methods_and_parameters(sync: type,
                                                                   other: type) -> None:
    diffs = {name: how for name, how in _differences(sync, other).items()
             if (sync.__name__, name) not in ALLOWED}
    assert not diffs, f"{sync.__name__} / {other.__name__}: {diffs}"


#: Members of a client its (de)serializing form need not have, with the reason.
WRAPPER_ALLOWED: dict[str, str] = {
    # Its constructor takes the (de)serializers on top of the client's options.
    "__init__": "takes the (de)serializers too",
    "create_batch": "a raw record batch bypasses the serializers (use .producer)",
    "send_batch": "a raw record batch bypasses the serializers (use .producer)",
    "start_budget": "the sync Producer's plumbing for its background start",
    "produce": "confluent-kafka's SerializingProducer.produce takes the key before the value "
               "(its Producer.produce, the value first), and no callback= alias",
    "produce_batch": "confluent-kafka's SerializingProducer inherits it without serializing; "
                     "each message's serializing is produce()'s (or .producer's with bytes)",
}


@pytest.mark.parametrize(("wrapper", "base"), [
    ("DeserializingConsumer", "Consumer"), ("AsyncDeserializingConsumer", "AsyncConsumer"),
    ("SerializingProducer", "Producer"), ("AsyncSerializingProducer", "AsyncProducer"),
    ("DeserializingShareConsumer", "ShareConsumer"),
    ("AsyncDeserializingShareConsumer", "AsyncShareConsumer")])
def test_a_serializing_client_offers_every_method_of_its_client(wrapper: str,
                                                                base: str) -> None:
    classes = _public_classes()
    diffs = _differences(classes[base], classes[wrapper])
    missing = {n: how for n, how in diffs.items()
               if how != f"only on {wrapper}" and n not in WRAPPER_ALLOWED}
    assert not missing, missing


def test_every_allowed_difference_is_still_a_difference() -> None:
    """An entry whose gap was closed must go, so the list stays the list of real ones."""
    by_name = {s.__name__: (s, a) for s, a in PAIRS}
    stale = []
    for (name, member), _reason in ALLOWED.items():
        if name in by_name and member not in _differences(*by_name[name]):
            stale.append((name, member))
    assert not stale, stale
