"""Field-level encryption (``ENCRYPT`` rules) with confluent-kafka's serdes and encryption
executor (Tink, local KMS) as the oracle, against kontrakt's embedded registry server, which
serves the DEK registry to both sides.

Each side gets its own rule registry holding its own executor. Tink registers KMS clients
process-wide by KEK URL, so confluent's side uses one secret throughout (``SECRET``).
"""

from __future__ import annotations

import base64
import json
import time
import warnings
from collections.abc import Iterator
from typing import Any

import pytest

from kontrakt import TopicPartition
from kontrakt.clients.consumer import Consumer
from kontrakt.clients.serializing import SerializingProducer
from kontrakt.errors import ValueDeserializationError, ValueSerializationError
from kontrakt.registry import Schema, SchemaNotFoundError, SchemaRegistryClient
from kontrakt.registry._models import RuleSet
from kontrakt.registry.server import RegistryServer
from kontrakt.serde import MessageField, SerializationContext
from kontrakt.serde.avro import AvroDeserializer, AvroSerializer
from kontrakt.serde.json_schema import JSONDeserializer, JSONSerializer
from kontrakt.serde.rules import RuleRegistry
from kontrakt.testing import TansuBroker

pytest.importorskip("cryptography")
pytest.importorskip("tink")
pytest.importorskip("hkdf")
from kontrakt.serde.rules.encryption import FieldEncryptionExecutor

with warnings.catch_warnings():
    warnings.simplefilter("ignore")  # authlib's httpx deprecation, on confluent's import
    from confluent_kafka import schema_registry as csr
    from confluent_kafka.schema_registry import avro as cavro
    from confluent_kafka.schema_registry import json_schema as cjson
    from confluent_kafka.schema_registry.rule_registry import RuleRegistry as CRuleRegistry
    from confluent_kafka.schema_registry.rules.encryption.encrypt_executor import (
        FieldEncryptionExecutor as CFieldEncryptionExecutor,
    )
    from confluent_kafka.schema_registry.rules.encryption.localkms.local_driver import (
        LocalKmsDriver as CLocalKmsDriver,
    )
    from confluent_kafka.serialization import MessageField as CField
    from confluent_kafka.serialization import SerializationContext as CContext

pytestmark = [
    pytest.mark.interop,
    pytest.mark.filterwarnings("ignore:The httpx module is deprecated"),
]

SECRET = "kontrakt-interop-secret"
LATEST = {"use.latest.version": True, "auto.register.schemas": False}
AVRO = json.dumps({"type": "record", "name": "Person", "namespace": "com.example", "fields": [
    {"name": "id", "type": "int"},
    {"name": "ssn", "type": "string", "confluent:tags": ["PII"]},
    {"name": "email", "type": ["null", "string"], "default": None,
     "confluent:tags": ["PII"]},
    {"name": "photo", "type": "bytes", "confluent:tags": ["PII"]},
    {"name": "city", "type": "string"}]})
JSON_SCHEMA = json.dumps({"type": "object", "properties": {
    "id": {"type": "integer"},
    "ssn": {"type": "string", "confluent:tags": ["PII"]},
    "city": {"type": "string"}}, "required": ["id", "ssn", "city"]})
AVRO_VALUES = [
    {"id": 1, "ssn": "123-45-6789", "email": "a@example.com", "photo": b"\x00\xffjpeg",
     "city": "Lyon"},
    {"id": 2, "ssn": "", "email": None, "photo": b"", "city": "Oslo"},
    {"id": 3, "ssn": "caf\u00e9 \u2603", "email": "\u00e9@x", "photo": bytes(range(256)),
     "city": "Kyiv"},
]
JSON_VALUES = [{"id": 1, "ssn": "123-45-6789", "city": "Lyon"},
               {"id": 2, "ssn": "\u2603", "city": "Oslo"}]


def _rule(kek: str, **params: str) -> dict[str, Any]:
    return {"name": "encrypt-pii", "kind": "TRANSFORM", "mode": "WRITEREAD", "type": "ENCRYPT",
            "tags": ["PII"], "params": {"encrypt.kek.name": kek,
                                        "encrypt.kms.type": "local-kms",
                                        "encrypt.kms.key.id": "interop-key", **params}}


@pytest.fixture(scope="module")
def server() -> Iterator[RegistryServer]:
    CLocalKmsDriver.register()
    with RegistryServer() as srv:
        yield srv


_OPEN: list[Any] = []  # executors to close (confluent's each open a DEK registry client)


@pytest.fixture()
def clients(server: RegistryServer) -> Iterator[tuple[Any, SchemaRegistryClient]]:
    theirs = csr.SchemaRegistryClient({"url": server.url})
    ours = SchemaRegistryClient({"url": server.url})
    yield theirs, ours
    while _OPEN:
        item = _OPEN.pop()
        closer = getattr(item, "close", None)
        if closer is not None:
            closer()
        else:  # confluent-kafka's DekRegistryClient closes as a context manager only
            item.__exit__(None, None, None)
    ours.close()
    theirs.__exit__(None, None, None)


def _ours() -> RuleRegistry:
    registry = RuleRegistry()
    executor = FieldEncryptionExecutor()
    _OPEN.append(executor)
    registry.register_executor(executor)
    return registry


def _theirs() -> Any:
    registry = CRuleRegistry()
    executor = CFieldEncryptionExecutor()
    _OPEN.append(executor)
    registry.register_executor(executor)
    return registry


def _serdes(fmt: str, confluent_client: Any, client: SchemaRegistryClient) -> tuple[Any, ...]:
    conf = {"secret": SECRET}
    if fmt == "avro":
        return (AvroSerializer(client, conf=LATEST, rule_registry=_ours(), rule_conf=conf),
                cavro.AvroSerializer(confluent_client, conf=LATEST, rule_registry=_theirs(),
                                     rule_conf=conf),
                AvroDeserializer(client, rule_registry=_ours(), rule_conf=conf),
                cavro.AvroDeserializer(confluent_client, rule_registry=_theirs(),
                                       rule_conf=conf))
    return (JSONSerializer(None, client, conf=LATEST, rule_registry=_ours(), rule_conf=conf),
            cjson.JSONSerializer(None, confluent_client, conf=LATEST, rule_registry=_theirs(),
                                 rule_conf=conf),
            JSONDeserializer(None, schema_registry_client=client, rule_registry=_ours(),
                             rule_conf=conf),
            cjson.JSONDeserializer(None, schema_registry_client=confluent_client,
                                   rule_registry=_theirs(), rule_conf=conf))


def _encrypted_ssn(data: bytes, fmt: str) -> str:
    if fmt == "json":
        return str(json.loads(data[5:])["ssn"])
    # Avro: after the 5-byte prefix, the zigzag int id (one byte for small ids), then ssn.
    length, pos = 0, 6
    shift = 0
    while True:
        b = data[pos]
        length |= (b & 0x7F) << shift
        pos += 1
        shift += 7
        if not b & 0x80:
            break
    return data[pos:pos + (length >> 1)].decode()


@pytest.mark.parametrize(("fmt", "algorithm"), [
    ("avro", "AES256_GCM"), ("avro", "AES128_GCM"), ("json", "AES256_GCM"),
    ("avro", "AES256_SIV")])
def test_each_side_reads_what_the_other_encrypted(clients: tuple[Any, SchemaRegistryClient],
                                                  fmt: str, algorithm: str) -> None:
    confluent_client, client = clients
    topic = f"enc-{fmt}-{algorithm.lower()}"
    text, schema_type, values = ((AVRO, "AVRO", AVRO_VALUES) if fmt == "avro"
                                 else (JSON_SCHEMA, "JSON", JSON_VALUES))
    client.register_schema(f"{topic}-value", Schema(text, schema_type, rule_set=RuleSet(
        domain_rules=(_rule(f"kek-{fmt}-{algorithm}", **{"encrypt.dek.algorithm": algorithm}),))))
    ours, theirs, our_de, their_de = _serdes(fmt, confluent_client, client)
    ctx, cctx = SerializationContext(topic, MessageField.VALUE), CContext(topic, CField.VALUE)
    for value in values:
        mine = ours(dict(value), ctx)
        yours = theirs(dict(value), cctx)
        assert value["ssn"] not in _encrypted_ssn(mine, fmt) or not value["ssn"]
        assert their_de(mine, cctx) == value
        assert our_de(yours, ctx) == value
        assert our_de(mine, ctx) == value
        if algorithm == "AES256_SIV":
            # deterministic, with the one DEK both sides took from the registry
            assert mine == yours
        else:
            assert mine != yours
    # both sides used one DEK, made by whichever wrote first
    assert client.get_versions(f"{topic}-value") == [1]


def test_rotated_deks_carry_their_version_both_ways(
        clients: tuple[Any, SchemaRegistryClient]) -> None:
    confluent_client, client = clients
    topic = "enc-rotated"
    client.register_schema(f"{topic}-value", Schema(AVRO, "AVRO", rule_set=RuleSet(
        domain_rules=(_rule("kek-rotated", **{"encrypt.dek.expiry.days": "1"}),))))
    ours, theirs, our_de, their_de = _serdes("avro", confluent_client, client)
    ctx, cctx = SerializationContext(topic, MessageField.VALUE), CContext(topic, CField.VALUE)
    value = AVRO_VALUES[0]
    mine, yours = ours(dict(value), ctx), theirs(dict(value), cctx)
    for data in (mine, yours):
        ciphertext = base64.b64decode(_encrypted_ssn(data, "avro"))
        assert ciphertext[:5] == b"\x00\x00\x00\x00\x01"  # magic 0, DEK version 1
    assert their_de(mine, cctx) == value
    assert our_de(yours, ctx) == value


def test_a_shared_kek_lets_the_registry_make_the_dek(
        server: RegistryServer, clients: tuple[Any, SchemaRegistryClient]) -> None:
    """A shared KEK: confluent's client registers the DEK without key material; kontrakt's
    server wraps a fresh one with the KMS it was configured with, and both sides read."""
    confluent_client, client = clients
    server.app.dek.kms_config = {"secret": SECRET}
    topic = "enc-shared"
    httpx_body = {"name": "kek-shared", "kmsType": "local-kms", "kmsKeyId": "interop-key",
                  "shared": True}
    import httpx

    assert httpx.post(f"{server.url}/dek-registry/v1/keks", json=httpx_body,
                      timeout=10).status_code == 200
    client.register_schema(f"{topic}-value", Schema(AVRO, "AVRO", rule_set=RuleSet(
        domain_rules=(_rule("kek-shared"),))))
    ours, theirs, our_de, their_de = _serdes("avro", confluent_client, client)
    ctx, cctx = SerializationContext(topic, MessageField.VALUE), CContext(topic, CField.VALUE)
    value = AVRO_VALUES[0]
    yours = theirs(dict(value), cctx)
    got = httpx.get(f"{server.url}/dek-registry/v1/keks/kek-shared/deks/{topic}-value",
                    timeout=10).json()
    assert got["keyMaterial"] and got["encryptedKeyMaterial"]
    assert our_de(yours, ctx) == value
    assert their_de(ours(dict(value), ctx), cctx) == value


def test_confluents_dek_registry_client_against_the_server(server: RegistryServer) -> None:
    from confluent_kafka.schema_registry.rules.encryption.dek_registry.dek_registry_client import (
        DekAlgorithm,
        DekRegistryClient,
    )

    theirs = DekRegistryClient({"url": server.url})
    fresh = DekRegistryClient({"url": server.url})
    _OPEN.extend((theirs, fresh))
    kek = theirs.register_kek("kek-their-client", "local-kms", "k1", doc="d")
    assert (kek.name, kek.kms_type, kek.kms_key_id, kek.shared, kek.doc) == (
        "kek-their-client", "local-kms", "k1", False, "d")
    material = base64.b64encode(b"\x01" * 44).decode()
    dek = theirs.register_dek("kek-their-client", "s-value", material,
                              DekAlgorithm.AES256_SIV, 3)
    assert (dek.version, dek.algorithm, dek.encrypted_key_material) == (
        3, DekAlgorithm.AES256_SIV, material)
    got = fresh.get_dek("kek-their-client", "s-value", DekAlgorithm.AES256_SIV, 3)
    assert got.encrypted_key_material == material and got.ts == dek.ts
    assert fresh.get_kek("kek-their-client").ts == kek.ts
    while _OPEN:
        _OPEN.pop().__exit__()


def test_a_wrong_secret_reads_nothing(clients: tuple[Any, SchemaRegistryClient]) -> None:
    """What confluent-kafka encrypted does not decrypt under another local KMS secret: a
    typed error naming the rule, no value."""
    confluent_client, client = clients
    topic = "enc-wrong-secret"
    client.register_schema(f"{topic}-value", Schema(AVRO, "AVRO", rule_set=RuleSet(
        domain_rules=(_rule("kek-wrong-secret"),))))
    _, theirs, _, _ = _serdes("avro", confluent_client, client)
    data = theirs(dict(AVRO_VALUES[0]), CContext(topic, CField.VALUE))
    wrong = AvroDeserializer(client, rule_registry=_ours(), rule_conf={"secret": "other"})
    with pytest.raises(ValueDeserializationError, match="'encrypt-pii'") as info:
        wrong(data, SerializationContext(topic, MessageField.VALUE))
    assert info.value.rule.name == "encrypt-pii"


@pytest.mark.integration
def test_a_producer_with_a_wrong_key_produces_nothing(
        tansu_broker: TansuBroker, clients: tuple[Any, SchemaRegistryClient],
        topic_name: str) -> None:
    """Through SerializingProducer on Tansu: a writer whose local KMS secret cannot unwrap
    the subject's DEK gets a typed error naming the rule and the topic stays empty; with
    the right secret the record lands, and confluent-kafka's deserializer decrypts it."""
    confluent_client, client = clients
    tansu_broker.create_topic(topic_name, 1)
    client.register_schema(f"{topic_name}-value", Schema(AVRO, "AVRO", rule_set=RuleSet(
        domain_rules=(_rule("kek-producer"),))))
    bootstrap = {"bootstrap.servers": tansu_broker.bootstrap_servers}
    cctx = CContext(topic_name, CField.VALUE)
    _, theirs, _, their_de = _serdes("avro", confluent_client, client)
    theirs(dict(AVRO_VALUES[0]), cctx)  # confluent's writer made the KEK and DEK

    def produce(secret: str) -> None:
        ser = AvroSerializer(client, conf=LATEST, rule_registry=_ours(),
                             rule_conf={"secret": secret})
        with SerializingProducer({**bootstrap, "value.serializer": ser}) as producer:
            try:
                producer.produce(topic_name, value=dict(AVRO_VALUES[0]))
            finally:
                producer.flush(10)

    tp = TopicPartition(topic_name, 0)
    with pytest.raises(ValueSerializationError, match=r"rule 'encrypt-pii'.*unwrap") as info:
        produce("wrong-secret")
    assert info.value.rule.name == "encrypt-pii"
    with Consumer({**bootstrap}) as consumer:
        assert consumer.end_offsets([tp], timeout=10) == {tp: 0}
    produce(SECRET)
    with Consumer({**bootstrap, "auto.offset.reset": "earliest"}) as consumer:
        consumer.assign([tp])
        got: list[Any] = []
        deadline = time.monotonic() + 15
        while not got and time.monotonic() < deadline:
            got.extend(consumer.consume(10, timeout=0.5))
    assert len(got) == 1
    assert AVRO_VALUES[0]["ssn"].encode() not in got[0].value
    assert their_de(got[0].value, cctx) == AVRO_VALUES[0]


@pytest.mark.parametrize("algorithm", ["AES128_GCM", "AES256_GCM", "AES256_SIV"])
def test_dek_keys_and_ciphertexts_match_tinks(algorithm: str) -> None:
    """Byte level, without a registry: a DEK made by either side works in the other's
    cipher (Tink's serialized key format), and the local KMS of either side unwraps what
    the other wrapped (the same HKDF-derived AES-128-GCM key)."""
    from confluent_kafka.schema_registry.rules.encryption.dek_registry.dek_registry_client import (
        DekAlgorithm,
    )
    from confluent_kafka.schema_registry.rules.encryption.encrypt_executor import Cryptor
    from confluent_kafka.schema_registry.rules.encryption.localkms.local_client import (
        LocalKmsClient,
    )

    from kontrakt.serde.rules.encryption_kms import DekCipher, LocalKmsDriver, new_dek

    theirs = Cryptor(DekAlgorithm[algorithm])
    for dek in (new_dek(algorithm), theirs.generate_key()):
        ours = DekCipher(algorithm, dek)
        for plaintext in (b"", b"123-45-6789", bytes(range(256)) * 3):
            assert theirs.decrypt(dek, ours.encrypt(plaintext), b"") == plaintext
            assert ours.decrypt(theirs.encrypt(dek, plaintext, b"")) == plaintext
            if algorithm == "AES256_SIV":
                assert ours.encrypt(plaintext) == theirs.encrypt(dek, plaintext, b"")
    their_kms = LocalKmsClient(SECRET).get_aead("local-kms://any")
    our_kms = LocalKmsDriver().new_aead({"secret": SECRET}, "local-kms://any")
    dek = new_dek(algorithm)
    assert their_kms.decrypt(our_kms.encrypt(dek, b""), b"") == dek
    assert our_kms.decrypt(their_kms.encrypt(dek, b""), b"") == dek


def test_rotation_by_either_side_is_followed_by_the_other(
        clients: tuple[Any, SchemaRegistryClient]) -> None:
    """With ``encrypt.dek.expiry.days``, whichever side finds the DEK expired makes the
    next version; the other side then writes with it, and each reads every version.

    One tagged field: confluent's executor looks the latest DEK up per field, so with a
    clock days ahead of the registry's timestamps it would rotate at each field."""
    from confluent_kafka.schema_registry.rules.encryption.encrypt_executor import Clock

    confluent_client, client = clients
    topic = "enc-rotation"
    schema = json.dumps({"type": "record", "name": "P", "fields": [
        {"name": "id", "type": "int"},
        {"name": "ssn", "type": "string", "confluent:tags": ["PII"]}]})
    client.register_schema(f"{topic}-value", Schema(schema, "AVRO", rule_set=RuleSet(
        domain_rules=(_rule("kek-rotation", **{"encrypt.dek.expiry.days": "1"}),))))
    later = int(time.time() * 1000) + 3 * 24 * 3600 * 1000

    class Later(Clock):  # type: ignore[misc]
        def now(self) -> int:
            return later

    conf = {"secret": SECRET}
    ctx, cctx = SerializationContext(topic, MessageField.VALUE), CContext(topic, CField.VALUE)
    value = {"id": 1, "ssn": "123-45-6789"}

    def theirs(clock: Any = None) -> Any:
        registry = CRuleRegistry()
        executor = CFieldEncryptionExecutor(clock) if clock else CFieldEncryptionExecutor()
        _OPEN.append(executor)
        registry.register_executor(executor)
        return cavro.AvroSerializer(confluent_client, conf=LATEST, rule_registry=registry,
                                    rule_conf=conf)

    def ours(clock: Any = None) -> Any:
        registry = RuleRegistry()
        executor = FieldEncryptionExecutor(clock=clock) if clock else FieldEncryptionExecutor()
        _OPEN.append(executor)
        registry.register_executor(executor)
        return AvroSerializer(client, conf=LATEST, rule_registry=registry, rule_conf=conf)

    def version(data: bytes) -> int:
        return int.from_bytes(base64.b64decode(_encrypted_ssn(data, "avro"))[1:5], "big")

    v1 = ours()(dict(value), ctx)
    v2 = theirs(Later())(dict(value), cctx)  # confluent's side finds v1 expired
    assert (version(v1), version(v2)) == (1, 2)
    assert version(ours()(dict(value), ctx)) == 2  # a fresh writer takes the latest
    v3 = ours(lambda: later + 3 * 24 * 3600 * 1000)(dict(value), ctx)  # ours rotates now
    assert version(v3) == 3
    assert version(theirs()(dict(value), cctx)) == 3
    _, _, our_de, their_de = _serdes("avro", confluent_client, client)
    for data in (v1, v2, v3):
        assert our_de(data, ctx) == value
        assert their_de(data, cctx) == value


@pytest.mark.parametrize("algorithm", ["AES256_GCM", "AES256_SIV"])
def test_protobuf_each_side_reads_what_the_other_encrypted(
        clients: tuple[Any, SchemaRegistryClient], algorithm: str) -> None:
    """Protobuf: fields tagged by ``(confluent.field_meta)`` (string, optional string,
    bytes, repeated, map values, nested messages) are encrypted by one side's Protobuf
    serializer and decrypted by the other's deserializer, both ways."""
    from kontrakt.serde.protobuf import ProtobufDeserializer, ProtobufSerializer
    from tests.unit.serde.test_protobuf_rules import TAGGED, person, person_class

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from confluent_kafka.schema_registry import protobuf as cproto

    confluent_client, client = clients
    cls = person_class(TAGGED)
    topic = f"enc-proto-{algorithm.lower()}"
    client.register_schema(f"{topic}-value", Schema(TAGGED, "PROTOBUF", rule_set=RuleSet(
        domain_rules=(_rule(f"kek-proto-{algorithm}",
                            **{"encrypt.dek.algorithm": algorithm}),))))
    conf = {"secret": SECRET}
    ours = ProtobufSerializer(cls, client, conf=LATEST, rule_registry=_ours(), rule_conf=conf)
    theirs = cproto.ProtobufSerializer(cls, confluent_client, {
        **LATEST, "use.deprecated.format": False}, rule_registry=_theirs(), rule_conf=conf)
    our_de = ProtobufDeserializer(cls, schema_registry_client=client, rule_registry=_ours(),
                                  rule_conf=conf)
    their_de = cproto.ProtobufDeserializer(cls, {"use.deprecated.format": False},
                                           confluent_client, rule_registry=_theirs(),
                                           rule_conf=conf)
    ctx, cctx = SerializationContext(topic, MessageField.VALUE), CContext(topic, CField.VALUE)
    value = person(cls)
    mine = ours(value, ctx)
    yours = theirs(value, cctx)  # confluent's encrypts the message in place: value last
    value = person(cls)
    assert cls.FromString(mine[6:]).ssn != value.ssn
    assert cls.FromString(yours[6:]).ssn != value.ssn
    assert their_de(mine, cctx) == value
    assert our_de(yours, ctx) == value
    if algorithm == "AES256_SIV":
        assert mine == yours  # deterministic, with the one DEK both took from the registry


@pytest.mark.parametrize(("fmt", "algorithm"), [
    ("avro", "AES256_GCM"), ("avro", "AES256_SIV"), ("protobuf", "AES256_GCM")])
def test_payload_encryption_both_ways(clients: tuple[Any, SchemaRegistryClient], fmt: str,
                                      algorithm: str) -> None:
    """``ENCRYPT_PAYLOAD`` in ``encodingRules``: confluent-kafka's deserializer with its
    ``EncryptionExecutor`` reads what kontrakt's serializer encrypted, and the reverse."""
    from confluent_kafka.schema_registry.rules.encryption.encrypt_executor import (
        EncryptionExecutor as CEncryptionExecutor,
    )

    from kontrakt.serde.protobuf import ProtobufDeserializer, ProtobufSerializer
    from kontrakt.serde.rules.encryption import PayloadEncryptionExecutor
    from tests.unit.serde.test_protobuf_rules import TAGGED, person, person_class

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from confluent_kafka.schema_registry import protobuf as cproto

    confluent_client, client = clients
    topic = f"enc-payload-{fmt}-{algorithm.lower()}"
    rule = {**_rule(f"kek-payload-{fmt}-{algorithm}", **{"encrypt.dek.algorithm": algorithm}),
            "type": "ENCRYPT_PAYLOAD", "name": "whole"}
    del rule["tags"]
    text, kind = (AVRO, "AVRO") if fmt == "avro" else (TAGGED, "PROTOBUF")
    client.register_schema(f"{topic}-value", Schema(text, kind, rule_set=RuleSet(
        encoding_rules=(rule,))))
    ours_reg, theirs_reg = RuleRegistry(), CRuleRegistry()
    ours_exec, theirs_exec = PayloadEncryptionExecutor(), CEncryptionExecutor()
    _OPEN.extend((ours_exec, theirs_exec))
    ours_reg.register_executor(ours_exec)
    theirs_reg.register_executor(theirs_exec)
    conf = {"secret": SECRET}
    ctx, cctx = SerializationContext(topic, MessageField.VALUE), CContext(topic, CField.VALUE)
    if fmt == "avro":
        value: Any = AVRO_VALUES[0]
        ours = AvroSerializer(client, conf=LATEST, rule_registry=ours_reg, rule_conf=conf)
        theirs = cavro.AvroSerializer(confluent_client, conf=LATEST, rule_registry=theirs_reg,
                                      rule_conf=conf)
        our_de = AvroDeserializer(client, rule_registry=ours_reg, rule_conf=conf)
        their_de = cavro.AvroDeserializer(confluent_client, rule_registry=theirs_reg,
                                          rule_conf=conf)
        mine, yours = ours(dict(value), ctx), theirs(dict(value), cctx)
        assert b"Lyon" not in mine and b"Lyon" not in yours
    else:
        cls = person_class(TAGGED)
        value = person(cls)
        ours = ProtobufSerializer(cls, client, conf=LATEST, rule_registry=ours_reg,
                                  rule_conf=conf)
        theirs = cproto.ProtobufSerializer(cls, confluent_client, {
            **LATEST, "use.deprecated.format": False}, rule_registry=theirs_reg,
            rule_conf=conf)
        our_de = ProtobufDeserializer(cls, schema_registry_client=client,
                                      rule_registry=ours_reg, rule_conf=conf)
        their_de = cproto.ProtobufDeserializer(cls, {"use.deprecated.format": False},
                                               confluent_client, rule_registry=theirs_reg,
                                               rule_conf=conf)
        mine, yours = ours(value, ctx), theirs(value, cctx)
    assert their_de(mine, cctx) == value
    assert our_de(yours, ctx) == value
    assert (mine == yours) == (algorithm == "AES256_SIV")


def test_field_encryption_in_a_schema_context(
        server: RegistryServer, clients: tuple[Any, SchemaRegistryClient]) -> None:
    """Subjects in a context (``:.ctx:topic-value``): confluent-kafka's executor passes the
    context on its KEK calls (``?context=.ctx``) and keys the DEK by the qualified subject;
    kontrakt's uses the same DEK, and both deserializers read both sides' records (each
    looks the writer id up with the strategy's subject, so in the context)."""
    confluent_client, client = clients
    topic = "enc-context"
    subject = f":.enc-ctx:{topic}-value"

    def strategy(ctx: Any, record_name: Any) -> str:
        return subject

    client.register_schema(subject, Schema(AVRO, "AVRO", rule_set=RuleSet(
        domain_rules=(_rule("kek-in-context"),))))
    conf = {"secret": SECRET}
    latest = {**LATEST, "subject.name.strategy": strategy}
    ours = AvroSerializer(client, conf=latest, rule_registry=_ours(), rule_conf=conf)
    theirs = cavro.AvroSerializer(confluent_client, conf=latest, rule_registry=_theirs(),
                                  rule_conf=conf)
    their_de = cavro.AvroDeserializer(confluent_client, conf={"subject.name.strategy": strategy},
                                      rule_registry=_theirs(), rule_conf=conf)
    our_de = AvroDeserializer(client, conf={"subject.name.strategy": strategy},
                              rule_registry=_ours(), rule_conf=conf)
    ctx, cctx = SerializationContext(topic, MessageField.VALUE), CContext(topic, CField.VALUE)
    value = AVRO_VALUES[0]
    yours = theirs(dict(value), cctx)
    mine = ours(dict(value), ctx)
    assert mine[:5] == yours[:5]  # the context's own schema id
    assert b"123-45-6789" not in mine and b"123-45-6789" not in yours
    # The id means another schema (none, or one without this KEK's rule) in the default
    # context, so a reader looking it up there could not read these records.
    writer_id = int.from_bytes(mine[1:5], "big")
    try:
        in_default: Schema | None = client.get_schema(writer_id)
    except SchemaNotFoundError:
        in_default = None
    assert in_default != client.get_schema(writer_id, subject_name=subject)
    assert their_de(mine, cctx) == value
    assert their_de(yours, cctx) == value
    assert our_de(mine, ctx) == value
    assert our_de(yours, ctx) == value
    import httpx

    deks = httpx.get(f"{server.url}/dek-registry/v1/keks/kek-in-context/deks",
                     timeout=10).json()
    assert deks == [subject]


def test_confluents_dek_client_with_contexts(server: RegistryServer) -> None:
    """confluent-kafka's DekRegistryClient with ``context=``: KEKs are the registry's (the
    context is accepted and, as on Confluent's server, not a namespace); a DEK subject
    qualified with the default context is the unqualified subject's DEK."""
    from confluent_kafka.schema_registry.rules.encryption.dek_registry.dek_registry_client import (
        DekAlgorithm,
        DekRegistryClient,
    )

    theirs = DekRegistryClient({"url": server.url})
    fresh = DekRegistryClient({"url": server.url})
    _OPEN.extend((theirs, fresh))
    kek = theirs.register_kek("kek-ctx-client", "local-kms", "k1", context=".team")
    assert fresh.get_kek("kek-ctx-client", context=".team") == kek
    assert fresh.get_kek("kek-ctx-client").name == "kek-ctx-client"
    material = base64.b64encode(b"\x02" * 44).decode()
    theirs.register_dek("kek-ctx-client", ":.:plain-value", material, DekAlgorithm.AES256_GCM)
    got = fresh.get_dek("kek-ctx-client", "plain-value")
    assert got.encrypted_key_material == material
    theirs.register_dek("kek-ctx-client", ":.team:plain-value",
                        base64.b64encode(b"\x03" * 44).decode())
    assert fresh.get_dek("kek-ctx-client", ":.team:plain-value").encrypted_key_material != \
        material


@pytest.mark.integration
def test_dlq_on_read_gets_the_record_as_it_arrived_not_decrypted(
        tansu_broker: TansuBroker, clients: tuple[Any, SchemaRegistryClient],
        topic_name: str) -> None:
    """A READ condition with ``onFailure: DLQ`` behind ``ENCRYPT_PAYLOAD``, on Tansu: the
    DLQ receives the record's original (encrypted) bytes, as Confluent's deserializers send
    it (their DlqAction sends ``ctx.originalValue()``, the bytes given to the
    deserializer), not the decrypted payload; replayed with the DLQ record's headers, both
    kontrakt's and confluent-kafka's deserializers decrypt and read it."""
    from confluent_kafka.schema_registry.rules.encryption.encrypt_executor import (
        EncryptionExecutor as CEncryptionExecutor,
    )

    from kontrakt.clients.producer import Producer
    from kontrakt.serde.rules.cel import CelExecutor
    from kontrakt.serde.rules.dlq import DlqAction
    from kontrakt.serde.rules.encryption import PayloadEncryptionExecutor

    pytest.importorskip("celpy")
    confluent_client, client = clients
    dlq_topic = f"{topic_name}-dlq"
    tansu_broker.create_topic(dlq_topic, 1)
    whole = {**_rule("kek-dlq-payload"), "type": "ENCRYPT_PAYLOAD", "name": "whole"}
    del whole["tags"]
    client.register_schema(f"{topic_name}-value", Schema(AVRO, "AVRO", rule_set=RuleSet(
        domain_rules=({"name": "small", "kind": "CONDITION", "mode": "READ", "type": "CEL",
                       "expr": "message.id < 0", "onFailure": "DLQ"},),
        encoding_rules=(whole,))))
    bootstrap = {"bootstrap.servers": tansu_broker.bootstrap_servers}
    ours = RuleRegistry()
    for item in (PayloadEncryptionExecutor(), CelExecutor()):
        ours.register_executor(item)
    ours.register_action(DlqAction())
    ctx = SerializationContext(topic_name, MessageField.VALUE)
    value = AVRO_VALUES[0]
    with Producer(bootstrap) as dlq_out:
        rule_conf = {"secret": SECRET, "producer": dlq_out, "dlq.topic": dlq_topic,
                     "dlq.auto.flush": "true"}
        data = AvroSerializer(client, conf=LATEST, rule_registry=ours,
                              rule_conf=rule_conf)(dict(value), ctx)
        assert value["ssn"].encode() not in data
        de = AvroDeserializer(client, rule_registry=ours, rule_conf=rule_conf)
        with pytest.raises(ValueDeserializationError, match="sent to DLQ topic") as info:
            de(data, ctx)
        assert info.value.rule.name == "small"
    tp = TopicPartition(dlq_topic, 0)
    dead: list[Any] = []
    with Consumer({**bootstrap, "enable.auto.commit": False}) as consumer:
        consumer.assign([tp])
        consumer.seek_to_beginning(tp)
        deadline = time.monotonic() + 20
        while not dead and time.monotonic() < deadline:
            dead.extend(consumer.consume(1, timeout=1))
    assert len(dead) == 1 and dead[0].value == data  # the bytes as they arrived
    assert dict(dead[0].headers)["__rule.name"] == b"small"
    replay = SerializationContext(topic_name, MessageField.VALUE, list(dead[0].headers))
    assert de(dead[0].value, replay) == value
    theirs = CRuleRegistry()
    their_exec = CEncryptionExecutor()
    _OPEN.append(their_exec)
    theirs.register_executor(their_exec)
    their_de = cavro.AvroDeserializer(confluent_client, rule_registry=theirs,
                                      rule_conf={"secret": SECRET})
    creplay = CContext(topic_name, CField.VALUE, list(dead[0].headers))
    assert their_de(dead[0].value, creplay) == value
