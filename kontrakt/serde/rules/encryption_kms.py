"""KMS drivers for field-level encryption, the local KMS, and the DEK key formats.

A KEK lives in a KMS; a **KMS driver** turns a KEK URL (``<kmsType>://<kmsKeyId>``, e.g.
``aws-kms://arn:aws:kms:...``) into an :class:`Aead` that wraps and unwraps DEKs. Drivers are
pluggable: implement :class:`KmsDriver` (a URL prefix and ``new_aead``) for AWS KMS, GCP KMS,
Azure Key Vault or HashiCorp Vault with their SDKs and :func:`register_kms_driver` it. Kontrakt
ships only :class:`LocalKmsDriver` (``local-kms://``), for development and tests: its key is
derived from a secret (the ``secret`` rule config, else the ``LOCAL_SECRET`` environment
variable) exactly as Confluent's local KMS derives it (HKDF-SHA256, no salt, no info,
16 bytes, AES-128-GCM), so DEKs it wraps unwrap in confluent-kafka and back.

A DEK's key material is the serialized Tink key Confluent's serdes store (``AesGcmKey`` /
``AesSivKey`` protobufs: ``0x1a 0x20 <32 bytes>`` for AES256_GCM, ``0x1a 0x10 <16>`` for
AES128_GCM, ``0x12 0x40 <64>`` for AES256_SIV); :func:`new_dek`, :func:`encrypt` and
:func:`decrypt` read and write that, and the ciphertexts Tink's raw primitives make
(AES-GCM: 12-byte nonce, ciphertext, 16-byte tag; AES-SIV: RFC 5297, the synthetic IV
first, deterministic).

Needs the ``cryptography`` package (``pip install 'kontrakt[encryption]'``).
"""

from __future__ import annotations

import abc
import os
import threading
from collections.abc import Mapping
from typing import Any, Protocol

from kontrakt._extras import raise_missing_extra

try:
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM, AESSIV
    from cryptography.hazmat.primitives.kdf.hkdf import HKDF
except ModuleNotFoundError as exc:
    raise_missing_extra(exc, "field-level encryption (kontrakt.serde.rules.encryption)")

from kontrakt.errors import RuleError

__all__ = ["Aead", "DekCipher", "KmsDriver", "LocalKmsDriver", "clear_kms_drivers", "decrypt",
           "encrypt",
           "get_kms_driver", "kek_aead", "new_dek", "register_kms_driver"]

#: the rule config / KEK property listing more KMS key ids to try after the KEK's own
ALTERNATE_KMS_KEY_IDS = "encrypt.alternate.kms.key.ids"

# DEK algorithm -> (protobuf field number of the key bytes, key length)
_KEY_FORMATS = {"AES128_GCM": (3, 16), "AES256_GCM": (3, 32), "AES256_SIV": (2, 64)}
_NONCE = 12


class Aead(Protocol):
    """Authenticated encryption with associated data (what a KMS key offers)."""

    def encrypt(self, plaintext: bytes, associated_data: bytes) -> bytes:
        """Encrypt ``plaintext``."""

    def decrypt(self, ciphertext: bytes, associated_data: bytes) -> bytes:
        """Decrypt ``ciphertext``; raises if it was not made with this key."""


class KmsDriver(abc.ABC):
    """A plug point for one KMS: the KEK URLs it serves and the AEAD of a KEK."""

    @abc.abstractmethod
    def get_key_url_prefix(self) -> str:
        """The KEK URL prefix this driver serves, e.g. ``"aws-kms://"``."""

    @abc.abstractmethod
    def new_aead(self, config: Mapping[str, Any], key_url: str) -> Aead:
        """The AEAD of the KEK at ``key_url``.

        Args:
            config: the serde's ``rule_conf`` merged with the KEK's ``kmsProps`` (credentials,
                endpoints, ...).
            key_url: ``<kmsType>://<kmsKeyId>``.

        Raises:
            Exception: the KMS cannot be reached or the key is unusable; the rule fails.
        """


_drivers: list[KmsDriver] = []
_drivers_lock = threading.Lock()


def register_kms_driver(driver: KmsDriver) -> None:
    """Add ``driver`` to the process-wide KMS drivers (the first matching prefix wins)."""
    with _drivers_lock:
        _drivers.append(driver)


def clear_kms_drivers() -> None:
    """Forget every registered driver (the local one comes back on the next lookup)."""
    with _drivers_lock:
        _drivers.clear()


def get_kms_driver(key_url: str) -> KmsDriver:
    """The driver for ``key_url``; the local KMS driver answers ``local-kms://`` when no
    other driver was registered for it.

    Raises:
        RuleError: no driver serves the URL (a pluggable KMS not registered).
    """
    with _drivers_lock:
        for driver in _drivers:
            if key_url.startswith(driver.get_key_url_prefix()):
                return driver
    if key_url.startswith(LocalKmsDriver.PREFIX):
        return _LOCAL
    raise RuleError(f"no KMS driver is registered for KEK URL {key_url!r}; register one with "
                    "kontrakt.serde.rules.encryption_kms.register_kms_driver")


class _LocalAead:
    """AES-128-GCM with a key derived from a secret, as Confluent's local KMS."""

    __slots__ = ("_gcm",)

    def __init__(self, secret: str) -> None:
        key = HKDF(algorithm=hashes.SHA256(), length=16, salt=None, info=b"").derive(
            secret.encode("utf-8"))
        self._gcm = AESGCM(key)

    def encrypt(self, plaintext: bytes, associated_data: bytes) -> bytes:
        nonce = os.urandom(_NONCE)
        return nonce + self._gcm.encrypt(nonce, plaintext, associated_data)

    def decrypt(self, ciphertext: bytes, associated_data: bytes) -> bytes:
        if len(ciphertext) < _NONCE + 16:
            raise ValueError("ciphertext too short")
        return self._gcm.decrypt(ciphertext[:_NONCE], ciphertext[_NONCE:], associated_data)


class LocalKmsDriver(KmsDriver):
    """``local-kms://<any key id>``: a KEK derived from a secret, for development and tests.

    The secret is the ``secret`` config key (the serde's ``rule_conf`` or the KEK's
    ``kmsProps``), else the ``LOCAL_SECRET`` environment variable, as Confluent's.
    """

    PREFIX = "local-kms://"

    def get_key_url_prefix(self) -> str:
        return self.PREFIX

    def new_aead(self, config: Mapping[str, Any], key_url: str) -> Aead:
        """Raises RuleError when no secret is configured."""
        secret = config.get("secret")
        if secret is None:
            secret = os.environ.get("LOCAL_SECRET")
        if not secret:
            raise RuleError("the local KMS has no secret: set 'secret' in the serde's "
                            "rule_conf or the LOCAL_SECRET environment variable")
        return _LocalAead(str(secret))


_LOCAL = LocalKmsDriver()


class _FirstOf:
    """Wraps with the first KMS key id, unwraps with the first that can (key rotation in the
    KMS: ``encrypt.alternate.kms.key.ids``)."""

    def __init__(self, aeads: list[tuple[str, Aead]]) -> None:
        self._aeads = aeads

    def encrypt(self, plaintext: bytes, associated_data: bytes) -> bytes:
        return self._first(lambda a: a.encrypt(plaintext, associated_data), "wrap")

    def decrypt(self, ciphertext: bytes, associated_data: bytes) -> bytes:
        return self._first(lambda a: a.decrypt(ciphertext, associated_data), "unwrap")

    def _first(self, fn: Any, what: str) -> bytes:
        last: BaseException | None = None
        for _url, aead in self._aeads:
            try:
                return fn(aead)  # type: ignore[no-any-return]
            except Exception as e:
                last = e
        urls = ", ".join(url for url, _ in self._aeads)
        raise RuleError(f"could not {what} the DEK with the KEK at {urls}: {last!r}") from last


def kek_aead(kms_type: str, kms_key_id: str, config: Mapping[str, Any]) -> Aead:
    """The AEAD of a KEK: its own key id, then any ``encrypt.alternate.kms.key.ids`` (comma
    separated, from ``config``) in turn.

    Args:
        kms_type: the KEK's ``kmsType``.
        kms_key_id: the KEK's ``kmsKeyId``.
        config: rule config merged with the KEK's ``kmsProps``.

    Raises:
        RuleError: no driver for the URL, or the driver could not make the AEAD.
    """
    ids = [kms_key_id] + [k.strip() for k in str(config.get(ALTERNATE_KMS_KEY_IDS) or "")
                          .split(",") if k.strip()]
    aeads: list[tuple[str, Aead]] = []
    for key_id in ids:
        url = f"{kms_type}://{key_id}"
        driver = get_kms_driver(url)
        try:
            aeads.append((url, driver.new_aead(config, url)))
        except RuleError:
            raise
        except Exception as e:
            raise RuleError(f"the KMS driver for {url!r} failed: {e!r}") from e
    return _FirstOf(aeads)


# ---------------------------------------------------------------------- DEK key material
def new_dek(algorithm: str) -> bytes:
    """A fresh DEK for ``algorithm``, as the serialized Tink key Confluent stores.

    Raises:
        RuleError: an unknown algorithm.
    """
    number, size = _format(algorithm)
    return bytes([(number << 3) | 2, size]) + os.urandom(size)


def _format(algorithm: str) -> tuple[int, int]:
    found = _KEY_FORMATS.get(algorithm)
    if found is None:
        raise RuleError(f"unknown DEK algorithm {algorithm!r}; one of "
                        f"{', '.join(_KEY_FORMATS)}")
    return found


def _raw_key(algorithm: str, material: bytes) -> bytes:
    """The AES key inside a serialized Tink key (version 0 only).

    Raises:
        RuleError: not a key of this algorithm.
    """
    number, size = _format(algorithm)
    i, key = 0, None
    while i < len(material):
        tag = material[i]
        i += 1
        if tag == 0x08:  # version (varint), must be 0
            if i >= len(material) or material[i] != 0:
                raise RuleError("unsupported DEK key version")
            i += 1
        elif tag == (number << 3) | 2 and i < len(material) and material[i] < 0x80:
            length = material[i]
            key = material[i + 1:i + 1 + length]
            i += 1 + length
        else:
            break
    if key is None or len(key) != size or i != len(material):
        raise RuleError(f"the DEK is not an {algorithm} key")
    return key


class DekCipher:
    """A DEK ready to use: its serialized key parsed and its AES primitive built once.

    Args:
        algorithm: ``AES128_GCM``, ``AES256_GCM`` or ``AES256_SIV``.
        dek: the serialized Tink key (see the module docs).

    Raises:
        RuleError: a malformed DEK or unknown algorithm.
    """

    __slots__ = ("_aead", "_siv")

    def __init__(self, algorithm: str, dek: bytes) -> None:
        key = _raw_key(algorithm, dek)
        self._siv = AESSIV(key) if algorithm == "AES256_SIV" else None
        self._aead = None if self._siv is not None else AESGCM(key)

    def encrypt(self, plaintext: bytes) -> bytes:
        """Encrypt as Tink's raw primitives do, with empty associated data."""
        if self._siv is not None:
            return self._siv.encrypt(plaintext, [b""])
        assert self._aead is not None
        nonce = os.urandom(_NONCE)
        return nonce + self._aead.encrypt(nonce, plaintext, b"")

    def decrypt(self, ciphertext: bytes) -> bytes:
        """The inverse of :meth:`encrypt`.

        Raises:
            RuleError: a ciphertext this DEK did not make (wrong key, tampered or truncated
                data).
        """
        try:
            if self._siv is not None:
                return self._siv.decrypt(ciphertext, [b""])
            assert self._aead is not None
            if len(ciphertext) < _NONCE + 16:
                raise ValueError("ciphertext too short")
            return self._aead.decrypt(ciphertext[:_NONCE], ciphertext[_NONCE:], b"")
        except Exception as e:
            what = "AES256_SIV" if self._siv is not None else "AES-GCM"
            raise RuleError(f"cannot decrypt with this {what} DEK (wrong key, or the data "
                            f"was altered): {type(e).__name__}") from None


def encrypt(algorithm: str, dek: bytes, plaintext: bytes) -> bytes:
    """Encrypt ``plaintext`` with DEK ``dek`` (serialized key); see :class:`DekCipher`.

    Raises:
        RuleError: a malformed DEK or unknown algorithm.
    """
    return DekCipher(algorithm, dek).encrypt(plaintext)


def decrypt(algorithm: str, dek: bytes, ciphertext: bytes) -> bytes:
    """The inverse of :func:`encrypt`.

    Raises:
        RuleError: a malformed DEK, or a ciphertext this DEK did not make.
    """
    return DekCipher(algorithm, dek).decrypt(ciphertext)
