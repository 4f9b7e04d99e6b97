"""Field-level encryption (``ENCRYPT`` rules) in the registry-bound serdes: every rule
parameter, DEK expiry and rotation, deterministic AES-SIV, refusals (a tagged field that is
neither string nor bytes, a wrong key, no KEK, no secret, no executor: a typed error naming
the rule and nothing written or read), pluggable KMS drivers, and the async shells.

The registry is kontrakt's in-memory mock client (it serves the DEK registry as the server
does); confluent-kafka's executor is the oracle in tests/interop/test_encrypt_confluent.py.
"""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import Iterator, Mapping
from typing import Any

import pytest

from kontrakt.errors import ValueDeserializationError, ValueSerializationError
from kontrakt.registry import (
    AsyncMockSchemaRegistryClient,
    DekRegistryClient,
    MockSchemaRegistryClient,
    Schema,
)
from kontrakt.registry._models import Metadata, RuleSet
from kontrakt.serde import MessageField, SerializationContext
from kontrakt.serde.avro import (
    AsyncAvroDeserializer,
    AsyncAvroSerializer,
    AvroDeserializer,
    AvroSerializer,
)
from kontrakt.serde.json_schema import JSONDeserializer, JSONSerializer
from kontrakt.serde.rules import RuleRegistry

pytest.importorskip("cryptography")
from kontrakt.serde.rules import encryption_kms
from kontrakt.serde.rules.encryption import FieldEncryptionExecutor
from kontrakt.serde.rules.encryption_kms import KmsDriver, LocalKmsDriver

CTX = SerializationContext("people", MessageField.VALUE)
SUBJECT = "people-value"
LATEST = {"use.latest.version": True, "auto.register.schemas": False}
SECRET = {"secret": "unit-secret"}
DAY_MS = 24 * 3600 * 1000
AVRO = json.dumps({"type": "record", "name": "Person", "fields": [
    {"name": "id", "type": "int"},
    {"name": "ssn", "type": "string", "confluent:tags": ["PII"]},
    {"name": "photo", "type": ["null", "bytes"], "default": None, "confluent:tags": ["PII"]},
    {"name": "city", "type": "string"}]})
VALUE = {"id": 7, "ssn": "123-45-6789", "photo": b"\x89PNG", "city": "Lyon"}


def rule(**params: str) -> dict[str, Any]:
    base = {"encrypt.kek.name": "kek1", "encrypt.kms.type": "local-kms",
            "encrypt.kms.key.id": "key1"}
    base.update(params)
    return {"name": "pii", "kind": "TRANSFORM", "mode": "WRITEREAD", "type": "ENCRYPT",
            "tags": ["PII"], "params": {k: v for k, v in base.items() if v != "-"}}


class Clock:
    def __init__(self) -> None:
        self.ms = 1_700_000_000_000

    def __call__(self) -> int:
        return self.ms


@pytest.fixture()
def registry() -> MockSchemaRegistryClient:
    return MockSchemaRegistryClient({"url": "mock://encrypt"})


def rules(clock: Any = None) -> RuleRegistry:
    out = RuleRegistry()
    out.register_executor(FieldEncryptionExecutor(clock=clock) if clock
                          else FieldEncryptionExecutor())
    return out


def serdes(registry: Any, rule_conf: Mapping[str, Any] | None = None, clock: Any = None,
           reader_conf: Mapping[str, Any] | None = None) -> tuple[Any, Any]:
    conf = SECRET if rule_conf is None else rule_conf
    ser = AvroSerializer(registry, conf=LATEST, rule_registry=rules(clock), rule_conf=conf)
    de = AvroDeserializer(registry, rule_registry=rules(),
                          rule_conf=conf if reader_conf is None else reader_conf)
    return ser, de


def register(registry: Any, *rule_list: dict[str, Any], schema: str = AVRO,
             kind: str = "AVRO", metadata: Metadata | None = None) -> None:
    registry.register_schema(SUBJECT, Schema(schema, kind, metadata=metadata,
                                              rule_set=RuleSet(domain_rules=rule_list)))


def _plain(registry: Any, data: bytes) -> dict[str, Any]:
    import io

    import fastavro

    return dict(fastavro.schemaless_reader(io.BytesIO(data[5:]),
                                           fastavro.parse_schema(json.loads(AVRO)), None))


def test_round_trip_encrypts_tagged_string_and_bytes_only(
        registry: MockSchemaRegistryClient) -> None:
    register(registry, rule())
    ser, de = serdes(registry)
    data = ser(dict(VALUE), CTX)
    raw = _plain(registry, data)
    assert raw["id"] == 7 and raw["city"] == "Lyon"  # untagged: plain
    ssn = base64.b64decode(raw["ssn"])  # a string field: base64 of nonce | ct | tag
    assert len(ssn) == 12 + len(VALUE["ssn"]) + 16
    assert isinstance(raw["photo"], bytes) and len(raw["photo"]) == 12 + 4 + 16
    assert de(data, CTX) == VALUE
    assert ser(dict(VALUE), CTX) != data  # AES-GCM: a fresh nonce each time
    assert de(ser({**VALUE, "photo": None}, CTX), CTX)["photo"] is None
    # the KEK was created from the rule's params, the DEK wrapped by it
    dek_client = DekRegistryClient(client=registry)
    kek = dek_client.get_kek("kek1")
    assert (kek.kms_type, kek.kms_key_id, kek.shared) == ("local-kms", "key1", False)
    dek = dek_client.get_dek("kek1", SUBJECT)
    assert dek.key_material is None  # the registry never sees the raw key
    aead = LocalKmsDriver().new_aead(SECRET, "local-kms://key1")
    assert aead.decrypt(dek.encrypted_key_material_bytes or b"", b"")[:2] == b"\x1a\x20"


def test_deterministic_mode_gives_equal_ciphertexts(registry: MockSchemaRegistryClient) -> None:
    register(registry, rule(**{"encrypt.dek.algorithm": "AES256_SIV"}))
    ser, de = serdes(registry)
    first, second = ser(dict(VALUE), CTX), ser(dict(VALUE), CTX)
    assert first == second
    assert _plain(registry, ser({**VALUE, "ssn": "other"}, CTX))["ssn"] != \
        _plain(registry, first)["ssn"]
    assert de(first, CTX) == VALUE
    dek = DekRegistryClient(client=registry).get_dek("kek1", SUBJECT, "AES256_SIV")
    assert dek.algorithm == "AES256_SIV"


def test_aes128_gcm(registry: MockSchemaRegistryClient) -> None:
    register(registry, rule(**{"encrypt.dek.algorithm": "AES128_GCM"}))
    ser, de = serdes(registry)
    assert de(ser(dict(VALUE), CTX), CTX) == VALUE


def test_params_from_schema_metadata(registry: MockSchemaRegistryClient) -> None:
    """A rule's params may come from the schema metadata's properties instead."""
    bare = {"name": "pii", "kind": "TRANSFORM", "mode": "WRITEREAD", "type": "ENCRYPT",
            "tags": ["PII"]}
    register(registry, bare, metadata=Metadata(properties={
        "encrypt.kek.name": "meta-kek", "encrypt.kms.type": "local-kms",
        "encrypt.kms.key.id": "k"}))
    ser, de = serdes(registry)
    assert de(ser(dict(VALUE), CTX), CTX) == VALUE
    assert DekRegistryClient(client=registry).get_kek("meta-kek").kms_key_id == "k"


@pytest.mark.parametrize(("params", "message"), [
    ({"encrypt.kek.name": "-"}, "no encrypt.kek.name"),
    ({"encrypt.kms.type": "-"}, "no encrypt.kms.type"),
    ({"encrypt.kms.key.id": "-"}, "encrypt.kms.key.id"),
    ({"encrypt.dek.algorithm": "ROT13"}, "unknown encrypt.dek.algorithm"),
    ({"encrypt.dek.expiry.days": "soon"}, "must be an integer"),
    ({"encrypt.dek.expiry.days": "-1"}, "must not be negative"),
    ({"encrypt.kms.type": "aws-kms", "encrypt.kek.name": "fresh"}, "no KMS driver"),
])
def test_bad_or_missing_params_refuse_the_record(registry: MockSchemaRegistryClient,
                                                 params: dict[str, str], message: str) -> None:
    register(registry, rule(**params))
    ser, _ = serdes(registry)
    with pytest.raises(ValueSerializationError, match=message) as info:
        ser(dict(VALUE), CTX)
    assert info.value.rule.name == "pii"
    assert "rule 'pii'" in str(info.value.__cause__)


def test_params_must_match_an_existing_kek(registry: MockSchemaRegistryClient) -> None:
    DekRegistryClient(client=registry).register_kek("kek1", "local-kms", "key1")
    for params, message in (({"encrypt.kms.key.id": "key2"}, "KMS key id"),
                            ({"encrypt.kms.type": "gcp-kms"}, "KMS type")):
        registry.clear_caches()
        register(registry, rule(**params))
        ser, _ = serdes(registry)
        with pytest.raises(ValueSerializationError, match=message):
            ser(dict(VALUE), CTX)
    # an existing KEK needs no kms params
    register(registry, rule(**{"encrypt.kms.type": "-", "encrypt.kms.key.id": "-"}))
    ser, de = serdes(registry)
    assert de(ser(dict(VALUE), CTX), CTX) == VALUE


def test_expiry_rotates_the_dek_and_old_records_still_read(
        registry: MockSchemaRegistryClient) -> None:
    register(registry, rule(**{"encrypt.dek.expiry.days": "2"}))
    clock = Clock()
    ser, de = serdes(registry, clock=clock)
    old = ser(dict(VALUE), CTX)
    dek_client = DekRegistryClient(client=registry)
    assert dek_client.get_dek_versions("kek1", SUBJECT) == [1]
    clock.ms += 1 * DAY_MS  # not yet expired
    ser(dict(VALUE), CTX)
    assert dek_client.get_dek_versions("kek1", SUBJECT) == [1]
    # The registry stamps DEKs with its own time; move the writer's clock past expiry.
    clock.ms = dek_client.get_dek("kek1", SUBJECT).ts + 2 * DAY_MS + 1  # type: ignore[operator]
    new = ser(dict(VALUE), CTX)
    assert dek_client.get_dek_versions("kek1", SUBJECT) == [1, 2]
    for data, version in ((old, 1), (new, 2)):
        ciphertext = base64.b64decode(_plain(registry, data)["ssn"])
        assert ciphertext[0] == 0 and int.from_bytes(ciphertext[1:5], "big") == version
        assert de(data, CTX) == VALUE
    # The new DEK is reused until it too expires. Its stamp is the registry's wall time,
    # which can fall in the same millisecond as the first one's: measure from its own stamp.
    clock.ms = dek_client.get_dek("kek1", SUBJECT, version=2).ts + DAY_MS  # type: ignore[operator]
    assert ser(dict(VALUE), CTX) != new and dek_client.get_dek_versions("kek1", SUBJECT) == [
        1, 2]


def test_a_tagged_field_that_is_not_string_or_bytes_refuses(
        registry: MockSchemaRegistryClient) -> None:
    schema = json.dumps({"type": "record", "name": "P", "fields": [
        {"name": "age", "type": "int", "confluent:tags": ["PII"]}]})
    register(registry, rule(), schema=schema)
    ser, _ = serdes(registry)
    with pytest.raises(ValueSerializationError,
                       match="only string and bytes fields can be encrypted") as info:
        ser({"age": 3}, CTX)
    assert info.value.rule.name == "pii"


def test_a_wrong_key_reads_and_writes_nothing(registry: MockSchemaRegistryClient) -> None:
    register(registry, rule())
    ser, _ = serdes(registry)
    data = ser(dict(VALUE), CTX)
    other = {"secret": "not-the-secret"}
    _, wrong_reader = serdes(registry, reader_conf=other)
    with pytest.raises(ValueDeserializationError, match=r"rule 'pii'.*unwrap") as info:
        wrong_reader(data, CTX)
    assert info.value.rule.name == "pii"
    wrong_writer, _ = serdes(registry, rule_conf=other)
    with pytest.raises(ValueSerializationError, match=r"rule 'pii'.*unwrap"):
        wrong_writer(dict(VALUE), CTX)
    # a tampered ciphertext is refused too (AES-GCM's tag)
    raw = _plain(registry, data)
    blob = bytearray(base64.b64decode(raw["ssn"]))
    blob[-1] ^= 1
    tampered = data.replace(raw["ssn"].encode(), base64.b64encode(bytes(blob)))
    _, de = serdes(registry)
    with pytest.raises(ValueDeserializationError, match="cannot decrypt"):
        de(tampered, CTX)


def test_no_secret_no_kek_no_executor_all_fail_closed(
        registry: MockSchemaRegistryClient, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("LOCAL_SECRET", raising=False)
    register(registry, rule())
    ser, _ = serdes(registry, rule_conf={})
    with pytest.raises(ValueSerializationError, match="no secret"):
        ser(dict(VALUE), CTX)
    monkeypatch.setenv("LOCAL_SECRET", SECRET["secret"])  # Confluent's fallback
    data = ser(dict(VALUE), CTX)
    # reading needs the KEK and DEK to exist: a record from another registry cannot be read
    elsewhere = MockSchemaRegistryClient({"url": "mock://elsewhere"})
    register(elsewhere, rule())
    _, de = serdes(elsewhere)
    with pytest.raises(ValueDeserializationError, match="no KEK 'kek1'"):
        de(data, CTX)
    unruled = AvroSerializer(registry, conf=LATEST, rule_registry=RuleRegistry())
    with pytest.raises(ValueSerializationError, match=r"no rule executor.*'ENCRYPT'"):
        unruled(dict(VALUE), CTX)


def test_json_schema_fields(registry: MockSchemaRegistryClient) -> None:
    schema = json.dumps({"type": "object", "properties": {
        "id": {"type": "integer"}, "ssn": {"type": "string", "confluent:tags": ["PII"]}}})
    register(registry, rule(), schema=schema, kind="JSON")
    rr = rules()
    ser = JSONSerializer(None, registry, conf=LATEST, rule_registry=rr, rule_conf=SECRET)
    de = JSONDeserializer(None, schema_registry_client=registry, rule_registry=rr,
                          rule_conf=SECRET)
    data = ser({"id": 1, "ssn": "x"}, CTX)
    assert json.loads(data[5:])["ssn"] != "x"
    assert de(data, CTX) == {"id": 1, "ssn": "x"}


class _XorAead:
    """A toy KMS key for the pluggable-driver test (not encryption)."""

    def encrypt(self, plaintext: bytes, associated_data: bytes) -> bytes:
        return bytes(b ^ 0x5A for b in plaintext)

    def decrypt(self, ciphertext: bytes, associated_data: bytes) -> bytes:
        return bytes(b ^ 0x5A for b in ciphertext)


class _TestKms(KmsDriver):
    def __init__(self) -> None:
        self.seen: list[tuple[str, dict[str, Any]]] = []

    def get_key_url_prefix(self) -> str:
        return "test-kms://"

    def new_aead(self, config: Mapping[str, Any], key_url: str) -> Any:
        self.seen.append((key_url, dict(config)))
        return _XorAead()


@pytest.fixture()
def test_kms() -> Iterator[_TestKms]:
    driver = _TestKms()
    encryption_kms.register_kms_driver(driver)
    yield driver
    encryption_kms.clear_kms_drivers()


def test_a_registered_kms_driver_is_used(registry: MockSchemaRegistryClient,
                                         test_kms: _TestKms) -> None:
    register(registry, rule(**{"encrypt.kms.type": "test-kms", "encrypt.kms.key.id": "k9"}))
    ser, de = serdes(registry, rule_conf={"region": "eu"})
    assert de(ser(dict(VALUE), CTX), CTX) == VALUE
    assert test_kms.seen[0] == ("test-kms://k9", {"region": "eu"})


def test_alternate_kms_key_ids_unwrap_after_a_kms_key_rotation(
        registry: MockSchemaRegistryClient) -> None:
    """A DEK wrapped under an old KMS key still unwraps when the KEK's key id moved on and
    the old one is listed in ``encrypt.alternate.kms.key.ids``."""

    class PerKey(KmsDriver):
        def get_key_url_prefix(self) -> str:
            return "per-key://"

        def new_aead(self, config: Mapping[str, Any], key_url: str) -> Any:
            return LocalKmsDriver().new_aead({"secret": key_url}, key_url)

    encryption_kms.register_kms_driver(PerKey())
    try:
        dek_client = DekRegistryClient(client=registry)
        dek_client.register_kek("kek1", "per-key", "old")
        register(registry, rule(**{"encrypt.kms.type": "-", "encrypt.kms.key.id": "-"}))
        ser, _ = serdes(registry)
        data = ser(dict(VALUE), CTX)
        dek_client.update_kek("kek1", kms_props={"encrypt.alternate.kms.key.ids": "old"})
        # The registry keeps a KEK's KMS key id; a KMS-side rotation is simulated in its store.
        rec = registry.app.state.store.dek.keks["kek1"]
        registry.app.state._commit([{"op": "kek", "rec": {**rec, "kmsKeyId": "new"}}])
        _, de = serdes(registry)
        assert de(data, CTX) == VALUE
        registry.app.state._commit([{"op": "kek", "rec": {**rec, "kmsKeyId": "new",
                                                          "kmsProps": {}}}])
        _, de = serdes(registry)
        with pytest.raises(ValueDeserializationError, match="unwrap"):
            de(data, CTX)
    finally:
        encryption_kms.clear_kms_drivers()


def test_async_serdes_agree_with_sync(registry: MockSchemaRegistryClient) -> None:
    register(registry, rule(**{"encrypt.dek.algorithm": "AES256_SIV"}))
    ser, _ = serdes(registry)
    expected = ser(dict(VALUE), CTX)

    async def main() -> None:
        areg = AsyncMockSchemaRegistryClient(state=registry.app.state)
        aser = AsyncAvroSerializer(areg, conf=LATEST, rule_registry=rules(),
                                   rule_conf=SECRET)
        ade = AsyncAvroDeserializer(areg, rule_registry=rules(), rule_conf=SECRET)
        assert await aser(dict(VALUE), CTX) == expected  # same DEK, deterministic
        assert await ade(expected, CTX) == VALUE
    asyncio.run(main())


def test_one_executor_serves_one_registry() -> None:
    shared = rules()
    one = MockSchemaRegistryClient({"url": "mock://one"})
    AvroSerializer(one, conf=LATEST, rule_registry=shared, rule_conf=SECRET)
    AvroDeserializer(one, rule_registry=shared, rule_conf=SECRET)  # same registry: fine
    with pytest.raises(Exception, match="another schema registry"):
        AvroSerializer(MockSchemaRegistryClient({"url": "mock://two"}), conf=LATEST,
                       rule_registry=shared, rule_conf=SECRET)
    with pytest.raises(Exception, match="already set"):
        AvroSerializer(one, conf=LATEST, rule_registry=shared, rule_conf={"secret": "b"})


@pytest.mark.parametrize(("statement", "message"), [
    ("from kontrakt.serde.rules.encryption import FieldEncryptionExecutor",
     "field-level encryption (kontrakt.serde.rules.encryption) needs the 'cryptography"),
    ("from kontrakt.serde.rules.encryption import FieldEncryptionExecutor",
     "pip install 'kontrakt[encryption]'"),
    # the registry, its server and the DEK registry client need no extra
    ("import kontrakt.registry.server, kontrakt.registry; raise RuntimeError('ok')",
     "RuntimeError: ok"),
])
def test_without_cryptography_the_extra_is_named(statement: str, message: str) -> None:
    import subprocess
    import sys
    from pathlib import Path

    code = f"import sys\nsys.modules['cryptography'] = None\n{statement}\n"
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=Path(__file__).resolve().parents[3], timeout=60)
    assert run.returncode == 1
    assert message in run.stderr.strip().splitlines()[-1], run.stderr


def test_async_serdes_over_http_use_a_sync_twin_of_the_client() -> None:
    """An async serde's executor reaches the DEK registry with a sync client built from the
    async client's settings (over real HTTP here), and closes it with the executor."""
    from kontrakt.registry import AsyncSchemaRegistryClient, SchemaRegistryClient
    from kontrakt.registry.server import RegistryServer

    with RegistryServer() as srv, SchemaRegistryClient({"url": srv.url}) as sync_client:
        register(sync_client, rule())
        executor = FieldEncryptionExecutor()
        async_rules = RuleRegistry()
        async_rules.register_executor(executor)

        async def main() -> bytes:
            async_client = AsyncSchemaRegistryClient({"url": srv.url})
            try:
                aser = AsyncAvroSerializer(async_client, conf=LATEST, rule_registry=async_rules,
                                           rule_conf=SECRET)
                return await aser(dict(VALUE), CTX)
            finally:
                await async_client.close()
        data = asyncio.run(main())
        executor.close()
        _, de = serdes(sync_client)
        assert de(data, CTX) == VALUE
        assert _plain(sync_client, data)["ssn"] != VALUE["ssn"]


def test_on_failure_error_none_lets_a_reader_without_the_key_see_ciphertext(
        registry: MockSchemaRegistryClient) -> None:
    """Confluent's documented pattern ``onFailure: "ERROR,NONE"``: a writer without the key
    is refused, a reader without it gets the record with the fields still encrypted."""
    register(registry, {**rule(), "onFailure": "ERROR,NONE"})
    ser, _ = serdes(registry)
    data = ser(dict(VALUE), CTX)
    other = {"secret": "not-the-secret"}
    _, reader = serdes(registry, reader_conf=other)
    got = reader(data, CTX)
    assert got == _plain(registry, data) and got["ssn"] != VALUE["ssn"]
    writer, _ = serdes(registry, rule_conf=other)
    with pytest.raises(ValueSerializationError, match="unwrap"):
        writer(dict(VALUE), CTX)


def test_records_stay_readable_after_their_dek_is_soft_deleted(
        registry: MockSchemaRegistryClient) -> None:
    register(registry, rule())
    ser, _ = serdes(registry)
    data = ser(dict(VALUE), CTX)
    DekRegistryClient(client=registry).delete_dek("kek1", SUBJECT)
    _, de = serdes(registry)
    assert de(data, CTX) == VALUE
    DekRegistryClient(client=registry).delete_dek("kek1", SUBJECT, permanent=True)
    _, de = serdes(registry)
    with pytest.raises(ValueDeserializationError, match="no DEK v1"):
        de(data, CTX)


def test_duck_typed_executors_without_use_client_still_configure(
        registry: MockSchemaRegistryClient) -> None:
    """The use_client hook (how ENCRYPT finds the DEK registry) is optional: an executor
    written against confluent's interface, not subclassing RuleBase, still works."""

    class Duck:
        conf: dict[str, Any] = {}

        def type(self) -> str:
            return "DUCK"

        def configure(self, client_conf: Any, rule_conf: Any) -> None:
            Duck.conf = dict(rule_conf)

        def transform(self, ctx: Any, message: Any) -> Any:
            return message

        def close(self) -> None:
            return None

    ducks = RuleRegistry()
    ducks.register_executor(Duck())  # type: ignore[arg-type]
    AvroSerializer(registry, conf=LATEST, rule_registry=ducks, rule_conf={"x": 1})
    assert Duck.conf == {"x": 1}
