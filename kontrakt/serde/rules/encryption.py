"""The ``ENCRYPT`` rule executor: client-side field-level encryption, as Confluent's data
contracts define it.

A rule ``{"type": "ENCRYPT", "mode": "WRITEREAD", "tags": ["PII"], "params":
{"encrypt.kek.name": ..., "encrypt.kms.type": ..., "encrypt.kms.key.id": ...}}`` encrypts
every string or bytes field tagged ``PII`` when writing and decrypts it when reading. Each
subject gets its own data encryption key (DEK), kept in the registry's DEK registry wrapped
by a key encryption key (KEK) that lives in a KMS (:mod:`.encryption_kms`: a local KMS for
development and tests, pluggable drivers for the rest).

Parameters (the rule's ``params``, else the schema metadata's ``properties``):

* ``encrypt.kek.name`` (required): the KEK; created on first write when missing, from
* ``encrypt.kms.type`` and ``encrypt.kms.key.id`` (e.g. ``local-kms`` and any id); when
  given, they must match the stored KEK's.
* ``encrypt.dek.algorithm``: ``AES256_GCM`` (default), ``AES128_GCM``, or ``AES256_SIV``
  (deterministic: equal values give equal ciphertexts, so they can be joined or looked up).
* ``encrypt.dek.expiry.days``: rotate the DEK when older than this many days; the value
  then carries the DEK version it was encrypted with (a ``0x00`` byte and 4 bytes big
  endian version before the ciphertext, as Confluent frames it), so old records still
  decrypt.

A string field's ciphertext is written base64 encoded; a bytes field's as bytes. Any other
tagged field type (int, enum, ...) fails the rule when writing. Nothing is written or read
when the rule cannot run (no KEK, no DEK when reading, no KMS driver or secret, a wrong key):
the rule fails, and its ``onFailure`` (``ERROR`` by default) refuses the record with an
error naming the rule.

``ENCRYPT_PAYLOAD`` (:class:`PayloadEncryptionExecutor`), a rule of the schema's
``encodingRules``, encrypts the whole encoded payload instead, with the same parameters
and keys; the schema id framing stays in the clear.

The executor finds the DEK registry through the serde's registry client (or the
``dek_client`` it is given). Its DEK registry calls are blocking; with an async serde they
happen on the event loop the first time each KEK and DEK is needed, then come from cache.

Register it with :meth:`FieldEncryptionExecutor.register` and give the serde the KMS
config, e.g. ``AvroSerializer(client, rule_conf={"secret": "..."})`` for the local KMS.
"""

from __future__ import annotations

import base64
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from kontrakt.errors import RuleError, SchemaRegistryError
from kontrakt.registry._dek import Dek, DekRegistryClient, Kek
from kontrakt.serde.rules import (
    READ,
    WRITE,
    FieldRuleExecutor,
    RuleBase,
    RuleContext,
    RuleExecutor,
    RuleRegistry,
)
from kontrakt.serde.rules._fields import FieldContext
from kontrakt.serde.rules.encryption_kms import DekCipher, kek_aead, new_dek

__all__ = ["ENCRYPT_DEK_ALGORITHM", "ENCRYPT_DEK_EXPIRY_DAYS", "ENCRYPT_KEK_NAME",
           "ENCRYPT_KMS_KEY_ID", "ENCRYPT_KMS_TYPE", "FieldEncryptionExecutor",
           "PayloadEncryptionExecutor"]

ENCRYPT_KEK_NAME = "encrypt.kek.name"
ENCRYPT_KMS_TYPE = "encrypt.kms.type"
ENCRYPT_KMS_KEY_ID = "encrypt.kms.key.id"
ENCRYPT_DEK_ALGORITHM = "encrypt.dek.algorithm"
ENCRYPT_DEK_EXPIRY_DAYS = "encrypt.dek.expiry.days"

_DAY_MS = 24 * 60 * 60 * 1000
_VERSION_MAGIC = 0


def _now_ms() -> int:
    return int(time.time() * 1000)


class _Encryption(RuleBase):
    """What the ``ENCRYPT`` and ``ENCRYPT_PAYLOAD`` executors share: the KMS config, the DEK
    registry client, and the KEKs, DEKs and ciphers they resolve.

    Args:
        dek_client: the DEK registry client to use; by default one over the registry client
            of the first serde built with this executor (a later serde with another
            registry is refused).
        clock: milliseconds since the epoch (tests move it to expire DEKs).
    """

    def __init__(self, dek_client: DekRegistryClient | None = None,
                 clock: Callable[[], int] = _now_ms) -> None:
        self._client = dek_client
        self._given = dek_client is not None
        self._bound: Any = None
        self._owned_transport: Any = None
        self._config: dict[str, Any] = {}
        self._clock = clock
        self._lock = threading.Lock()
        # DEK ciphers by (kek, subject, version, algorithm), and what a rule's lookup
        # resolved to (see resolve): the per-record path is two dict reads.
        self._ciphers: dict[tuple[str, str, int, str], DekCipher] = {}
        self._resolved: dict[tuple[Any, ...], tuple[Dek, DekCipher]] = {}

    def _named(self, ctx: RuleContext, run: Callable[[], Any]) -> Any:
        try:
            return run()
        except RuleError as e:
            if str(e).startswith(f"rule {ctx.rule.name!r}"):
                raise
            raise RuleError(f"{ctx.rule.describe()}: {e}") from e

    def configure(self, client_conf: Mapping[str, Any], rule_conf: Mapping[str, Any]) -> None:
        """Take the KMS config from a serde's ``rule_conf`` (``secret`` for the local KMS,
        driver settings, ``encrypt.alternate.kms.key.ids``).

        Raises:
            RuleError: a key already set by another serde to another value.
        """
        with self._lock:
            for key, value in rule_conf.items():
                if key in self._config and self._config[key] != value:
                    raise RuleError(f"ENCRYPT executor: rule config {key!r} is already set "
                                    "to another value by another serde")
                self._config[key] = value

    def use_client(self, client: Any) -> None:
        """Use the DEK registry behind ``client`` (the serde's registry client).

        Raises:
            RuleError: the executor already serves another registry.
        """
        if self._given or client is None:
            return
        with self._lock:
            if self._bound is not None:
                if _same_registry(self._bound, client):
                    return
                raise RuleError("ENCRYPT executor: already serving another schema registry; "
                                "give each registry its own RuleRegistry")
            self._bound = client
            self._client = _dek_client_for(client)
            self._owned_transport = self._client

    def close(self) -> None:
        """Close the DEK registry client this executor opened."""
        if self._owned_transport is not None:
            self._owned_transport.close()

    def new_transform(self, ctx: RuleContext) -> Any:
        rule = ctx.rule
        kek_name = ctx.get_parameter(ENCRYPT_KEK_NAME)
        if not kek_name:
            raise RuleError(f"{rule.describe()}: no {ENCRYPT_KEK_NAME} parameter")
        algorithm = ctx.get_parameter(ENCRYPT_DEK_ALGORITHM) or "AES256_GCM"
        if algorithm not in ("AES128_GCM", "AES256_GCM", "AES256_SIV"):
            raise RuleError(f"{rule.describe()}: unknown {ENCRYPT_DEK_ALGORITHM} {algorithm!r}")
        raw_days = ctx.get_parameter(ENCRYPT_DEK_EXPIRY_DAYS)
        try:
            expiry_days = int(raw_days) if raw_days is not None else 0
        except ValueError:
            raise RuleError(f"{rule.describe()}: {ENCRYPT_DEK_EXPIRY_DAYS} must be an "
                            f"integer, not {raw_days!r}") from None
        if expiry_days < 0:
            raise RuleError(f"{rule.describe()}: {ENCRYPT_DEK_EXPIRY_DAYS} must not be "
                            "negative")
        if ctx.rule_mode not in (WRITE, READ):
            raise RuleError(f"{rule.describe()}: ENCRYPT does not run in {ctx.rule_mode}")
        return _Transform(self, ctx, kek_name, algorithm, expiry_days).field

    # ---------------------------------------------------------------- keys
    def client(self, ctx: RuleContext) -> DekRegistryClient:
        if self._client is None:
            raise RuleError(f"{ctx.rule.describe()}: no DEK registry client (build the serde "
                            "with a registry client, or give the executor a dek_client)")
        return self._client

    def kek(self, ctx: RuleContext, name: str) -> Kek:
        client = self.client(ctx)
        kms_type = ctx.get_parameter(ENCRYPT_KMS_TYPE)
        kms_key_id = ctx.get_parameter(ENCRYPT_KMS_KEY_ID)
        kek: Kek | None = _get_or_none(lambda: client.get_kek(name))
        if kek is None:
            if ctx.rule_mode == READ:
                raise RuleError(f"no KEK {name!r} in the DEK registry to decrypt with")
            if not kms_type or not kms_key_id:
                raise RuleError(f"no KEK {name!r} in the DEK registry, and no "
                                f"{ENCRYPT_KMS_TYPE} / {ENCRYPT_KMS_KEY_ID} to create it with")
            try:
                kek = client.register_kek(name, kms_type, kms_key_id, shared=False)
            except SchemaRegistryError as e:
                if e.http_status_code != 409:  # created meanwhile by another writer
                    raise
                kek = client.get_kek(name)
        if kms_type and kek.kms_type != kms_type:
            raise RuleError(f"KEK {name!r} has KMS type {kek.kms_type!r}, the rule says "
                            f"{kms_type!r}")
        if kms_key_id and kek.kms_key_id != kms_key_id:
            raise RuleError(f"KEK {name!r} has KMS key id {kek.kms_key_id!r}, the rule says "
                            f"{kms_key_id!r}")
        return kek

    def aead(self, kek: Kek) -> Any:
        return kek_aead(kek.kms_type, kek.kms_key_id, {**self._config, **kek.kms_props})

    def cipher(self, kek: Kek, dek: Dek) -> DekCipher:
        """The DEK's cipher: its raw key from the registry (shared KEKs) or unwrapped with the
        KEK."""
        key = (dek.kek_name, dek.subject, dek.version, dek.algorithm)
        cipher = self._ciphers.get(key)
        if cipher is None:
            raw = dek.key_material_bytes
            if raw is None:
                wrapped = dek.encrypted_key_material_bytes
                if wrapped is None:
                    raise RuleError(f"DEK {dek.subject!r} v{dek.version} has no key material")
                raw = self.aead(kek).decrypt(wrapped, b"")
            cipher = DekCipher(dek.algorithm, raw)
            with self._lock:
                self._ciphers[key] = cipher
        return cipher

    def resolve(self, ctx: RuleContext, kek_name: str, subject: str, algorithm: str,
                version: int | str, expiry_days: int) -> tuple[Dek, DekCipher]:
        """The DEK (and its cipher) a rule encrypts or decrypts with, from cache after the
        first record; a cached latest DEK is looked up again once it expires."""
        key = (ctx.rule_mode, kek_name, ctx.get_parameter(ENCRYPT_KMS_TYPE),
               ctx.get_parameter(ENCRYPT_KMS_KEY_ID), subject, algorithm, version)
        found = self._resolved.get(key)
        if found is not None and not (ctx.rule_mode == WRITE
                                      and self._expired(found[0], expiry_days)):
            return found
        kek = self.kek(ctx, kek_name)
        dek = self.dek(ctx, kek, subject, algorithm, version, expiry_days)
        found = (dek, self.cipher(kek, dek))
        with self._lock:
            self._resolved[key] = found
        return found

    def _expired(self, dek: Dek, expiry_days: int) -> bool:
        return expiry_days > 0 and (self._clock() - (dek.ts or 0)) > expiry_days * _DAY_MS

    def dek(self, ctx: RuleContext, kek: Kek, subject: str, algorithm: str,
            version: int | str, expiry_days: int) -> Dek:
        client = self.client(ctx)
        # Readers may use a soft-deleted DEK (records written with it stay readable, as
        # with Confluent's); writers only live ones.
        reading = ctx.rule_mode == READ
        dek: Dek | None = _get_or_none(
            lambda: client.get_dek(kek.name, subject, algorithm, version, deleted=reading))
        if reading:
            if dek is None:
                raise RuleError(f"no DEK v{version} of {subject!r} under KEK {kek.name!r} "
                                "to decrypt with")
            return dek
        expired = dek is not None and self._expired(dek, expiry_days)
        if dek is not None and not expired:
            return dek
        new_version = dek.version + 1 if dek is not None else 1
        wrapped = None
        if not kek.shared:
            wrapped = base64.b64encode(self.aead(kek).encrypt(new_dek(algorithm), b"")).decode()
        try:
            return client.register_dek(kek.name, subject, wrapped, algorithm, new_version)
        except SchemaRegistryError as e:
            if e.http_status_code != 409:
                if dek is not None:  # keep writing with the expired DEK rather than stop
                    return dek
                raise
        # Another writer created this version first: use theirs.
        client.clear_caches()
        return client.get_dek(kek.name, subject, algorithm, new_version)


class FieldEncryptionExecutor(_Encryption, FieldRuleExecutor):
    """Runs ``ENCRYPT`` rules on the tagged string and bytes fields of Avro, JSON Schema and
    Protobuf messages (see the module docs).

    Args:
        dek_client: the DEK registry client to use; by default one over the registry client
            of the first serde built with this executor (a later serde with another
            registry is refused).
        clock: milliseconds since the epoch (tests move it to expire DEKs).
    """

    def type(self) -> str:
        return "ENCRYPT"

    @classmethod
    def register(cls) -> None:
        """Register a ``FieldEncryptionExecutor`` in the process-wide :class:`RuleRegistry`."""
        RuleRegistry.register_rule_executor(cls())

    def transform(self, ctx: RuleContext, message: Any) -> Any:
        """Encrypt (WRITE) or decrypt (READ) the tagged fields of ``message``.

        Raises:
            RuleError: naming the rule, when it cannot run (see the module docs).
        """
        return self._named(ctx, lambda: FieldRuleExecutor.transform(self, ctx, message))


class PayloadEncryptionExecutor(_Encryption, RuleExecutor):
    """Runs ``ENCRYPT_PAYLOAD`` rules: the whole encoded payload (after the format's encoder,
    before the schema id framing) is encrypted when writing and decrypted when reading, as
    Confluent's serdes do with a schema's ``encodingRules``. Parameters, KEKs, DEKs, expiry
    and the version prefix are as ``ENCRYPT``'s (see the module docs); the DEK is the
    subject's.

    Args:
        dek_client: as :class:`FieldEncryptionExecutor`'s.
        clock: milliseconds since the epoch (tests move it to expire DEKs).
    """

    def type(self) -> str:
        return "ENCRYPT_PAYLOAD"

    @classmethod
    def register(cls) -> None:
        """Register a ``PayloadEncryptionExecutor`` in the process-wide
        :class:`RuleRegistry`."""
        RuleRegistry.register_rule_executor(cls())

    def transform(self, ctx: RuleContext, message: Any) -> Any:
        """Encrypt (WRITE) or decrypt (READ) ``message``, the payload bytes.

        Raises:
            RuleError: naming the rule, when it cannot run (see the module docs), or when
                run on something else than bytes (as a domain rule).
        """
        if not isinstance(message, (bytes, bytearray, memoryview)):
            raise RuleError(f"{ctx.rule.describe()}: ENCRYPT_PAYLOAD runs on the encoded "
                            "payload; put it in the rule set's encodingRules")
        payload = FieldContext(None, "payload", "payload", "BYTES", frozenset())
        return self._named(ctx, lambda: self.new_transform(ctx)(ctx, payload, bytes(message)))


class _Transform:
    """One record's encryption or decryption: the KEK and DEK looked up on the first field."""

    __slots__ = ("_deks", "algorithm", "ctx", "executor", "expiry_days", "kek_name")

    def __init__(self, executor: _Encryption, ctx: RuleContext, kek_name: str,
                 algorithm: str, expiry_days: int) -> None:
        self.executor = executor
        self.ctx = ctx
        self.kek_name = kek_name
        self.algorithm = algorithm
        self.expiry_days = expiry_days
        self._deks: dict[int | str, tuple[Dek, DekCipher]] = {}

    def _key(self, version: int | str) -> tuple[Dek, DekCipher]:
        found = self._deks.get(version)
        if found is None:
            subject = self.ctx.subject
            if not subject:
                raise RuleError("no subject to look the DEK up by")
            found = self._deks[version] = self.executor.resolve(
                self.ctx, self.kek_name, subject, self.algorithm, version, self.expiry_days)
        return found

    def field(self, ctx: RuleContext, field: Any, value: Any) -> Any:
        if value is None:
            return None
        kind = field.field_type
        rotated = self.expiry_days > 0
        if ctx.rule_mode == WRITE:
            if kind == "STRING" and isinstance(value, str):
                plaintext = value.encode("utf-8")
            elif kind == "BYTES" and isinstance(value, (bytes, bytearray, memoryview)):
                plaintext = bytes(value)
            else:
                raise RuleError(f"field {field.full_name!r} is {kind}; only string and bytes "
                                "fields can be encrypted")
            dek, cipher = self._key("latest" if rotated else 1)
            ciphertext = cipher.encrypt(plaintext)
            if rotated:
                ciphertext = (bytes([_VERSION_MAGIC]) + dek.version.to_bytes(4, "big")
                              + ciphertext)
            return base64.b64encode(ciphertext).decode() if kind == "STRING" else ciphertext
        if kind == "STRING" and isinstance(value, str):
            try:
                ciphertext = base64.b64decode(value, validate=True)
            except ValueError:
                raise RuleError(f"field {field.full_name!r} is not base64 ciphertext") from None
        elif kind == "BYTES" and isinstance(value, (bytes, bytearray, memoryview)):
            ciphertext = bytes(value)
        else:
            return value  # as Confluent's: other types were never encrypted
        version: int = 1
        if rotated:
            if len(ciphertext) < 5:
                raise RuleError(f"field {field.full_name!r} carries no DEK version")
            version = int.from_bytes(ciphertext[1:5], "big")
            ciphertext = ciphertext[5:]
        _, cipher = self._key(version)
        plaintext = cipher.decrypt(ciphertext)
        if kind == "STRING":
            try:
                return plaintext.decode("utf-8")
            except UnicodeDecodeError:
                raise RuleError(f"field {field.full_name!r} decrypts to bytes that are not "
                                "UTF-8") from None
        return plaintext


def _get_or_none(fetch: Callable[[], Any]) -> Any:
    try:
        return fetch()
    except SchemaRegistryError as e:
        if e.http_status_code == 404:
            return None
        raise


def _same_registry(a: Any, b: Any) -> bool:
    if a is b:
        return True
    app_a, app_b = getattr(a, "app", None), getattr(b, "app", None)
    if app_a is not None or app_b is not None:
        return app_a is not None and app_b is not None and app_a.state is app_b.state
    core_a, core_b = getattr(a, "_core", None), getattr(b, "_core", None)
    return core_a is not None and core_b is not None and core_a.config == core_b.config


def _dek_client_for(client: Any) -> DekRegistryClient:
    """A sync DEK registry client over ``client``'s registry and settings."""
    from kontrakt.registry._async_client import AsyncSchemaRegistryClient
    from kontrakt.registry._client import SchemaRegistryClient
    from kontrakt.registry._mock import MockSchemaRegistryClient

    if isinstance(client, SchemaRegistryClient):
        return DekRegistryClient(client=client)  # the serde's owner closes its client
    app = getattr(client, "app", None)
    if app is not None:  # an async mock: a sync mock over the same in-memory registry
        transport = MockSchemaRegistryClient(state=app.state)
    elif isinstance(client, AsyncSchemaRegistryClient):
        transport = _sync_twin(client)
    else:
        raise RuleError(f"ENCRYPT executor: cannot reach a DEK registry through a "
                    f"{type(client).__name__}; give the executor a dek_client")
    dek_client = DekRegistryClient(client=transport)
    dek_client._owned = True  # made here, so closed with the executor
    return dek_client


def _sync_twin(client: Any) -> Any:
    """A sync registry client with an async one's validated settings (auth, TLS, retries):
    the executor runs synchronously, inside the serde's call."""
    import httpx

    from kontrakt.registry._client import SchemaRegistryClient
    from kontrakt.registry._core import RegistryCore

    twin = object.__new__(SchemaRegistryClient)
    twin._core = RegistryCore(client._core.config)
    twin._http = httpx.Client(**twin._http_options())
    twin._flights = {}
    twin._flights_lock = threading.Lock()
    return twin
