"""DEK registry client (``/dek-registry/v1``): key encryption keys (KEKs) and data encryption
keys (DEKs) for client-side field-level encryption, with confluent-kafka-python's names.

The operations are written once as sans-I/O generators (:class:`DekCore`) that yield
:class:`~kontrakt.registry._exchange.Call` objects; :class:`DekRegistryClient` and
:class:`AsyncDekRegistryClient` run them through a registry client's transport (HTTP,
authentication, retries, fail-over and timeouts: see
:class:`~kontrakt.registry.SchemaRegistryClient`), so there is no second HTTP stack.
"""

from __future__ import annotations

import base64
import threading
from collections.abc import Generator, Hashable, Mapping
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, TypeVar

from cachetools import LRUCache

from kontrakt.errors import SchemaRegistryError
from kontrakt.registry._async_client import AsyncSchemaRegistryClient
from kontrakt.registry._client import SchemaRegistryClient
from kontrakt.registry._core import Call, _q
from kontrakt.registry._exchange import _shape

__all__ = ["DEK_ALGORITHMS", "AsyncDekRegistryClient", "Dek", "DekCore", "DekRegistryClient",
           "Kek"]

T = TypeVar("T")
Op = Generator[Call, Any, T]

#: the DEK algorithms Confluent's serdes know; AES256_SIV is deterministic
DEK_ALGORITHMS = ("AES128_GCM", "AES256_GCM", "AES256_SIV")
_ROOT = "/dek-registry/v1/keks"


@dataclass(frozen=True, slots=True)
class Kek:
    """A key encryption key: a key held by a KMS, named in the registry.

    Attributes:
        name, kms_type (``local-kms``, ``aws-kms``, ...), kms_key_id, kms_props, doc, shared
        (whether the registry may reach the KMS to make DEKs itself), ts (ms), deleted: as
        the registry's ``name``, ``kmsType``, ``kmsKeyId``, ``kmsProps``, ``doc``,
        ``shared``, ``ts``, ``deleted``.
    """

    name: str
    kms_type: str
    kms_key_id: str
    kms_props: Mapping[str, str] = field(default_factory=dict)
    doc: str | None = None
    shared: bool = False
    ts: int | None = None
    deleted: bool = False

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Kek:
        """Read the registry's JSON object."""
        return cls(name=str(data["name"]), kms_type=str(data["kmsType"]),
                   kms_key_id=str(data["kmsKeyId"]),
                   kms_props={str(k): str(v) for k, v in (data.get("kmsProps") or {}).items()},
                   doc=data.get("doc"), shared=bool(data.get("shared", False)),
                   ts=data.get("ts"), deleted=bool(data.get("deleted", False)))

    def to_dict(self) -> dict[str, Any]:
        """The registry's JSON object."""
        out: dict[str, Any] = {"name": self.name, "kmsType": self.kms_type,
                               "kmsKeyId": self.kms_key_id, "kmsProps": dict(self.kms_props),
                               "shared": self.shared, "deleted": self.deleted}
        if self.doc is not None:
            out["doc"] = self.doc
        if self.ts is not None:
            out["ts"] = self.ts
        return out


@dataclass(frozen=True, slots=True)
class Dek:
    """A data encryption key of one (KEK, subject, algorithm, version).

    Attributes:
        kek_name, subject, version, algorithm, ts (ms), deleted: as the registry's.
        encrypted_key_material: the key wrapped by its KEK, base64 (``encryptedKeyMaterial``).
        key_material: the raw key, base64; only for shared KEKs (the registry unwraps it)
            or once a client has unwrapped it.
    """

    kek_name: str
    subject: str
    version: int
    algorithm: str = "AES256_GCM"
    encrypted_key_material: str | None = None
    key_material: str | None = field(default=None, repr=False)
    ts: int | None = None
    deleted: bool = False

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Dek:
        """Read the registry's JSON object."""
        return cls(kek_name=str(data["kekName"]), subject=str(data["subject"]),
                   version=int(data["version"]),
                   algorithm=str(data.get("algorithm") or "AES256_GCM"),
                   encrypted_key_material=data.get("encryptedKeyMaterial"),
                   key_material=data.get("keyMaterial"), ts=data.get("ts"),
                   deleted=bool(data.get("deleted", False)))

    def to_dict(self) -> dict[str, Any]:
        """The registry's JSON object."""
        out: dict[str, Any] = {"kekName": self.kek_name, "subject": self.subject,
                               "version": self.version, "algorithm": self.algorithm,
                               "deleted": self.deleted}
        for key, value in (("encryptedKeyMaterial", self.encrypted_key_material),
                           ("keyMaterial", self.key_material), ("ts", self.ts)):
            if value is not None:
                out[key] = value
        return out

    @property
    def encrypted_key_material_bytes(self) -> bytes | None:
        """The wrapped key, decoded."""
        m = self.encrypted_key_material
        return None if m is None else base64.b64decode(m)

    @property
    def key_material_bytes(self) -> bytes | None:
        """The raw key, decoded (None until known)."""
        m = self.key_material
        return None if m is None else base64.b64decode(m)


def _algorithm(algorithm: str) -> str:
    text = str(getattr(algorithm, "value", algorithm))
    if text not in DEK_ALGORITHMS:
        raise ValueError(f"unknown DEK algorithm {text!r}; one of {', '.join(DEK_ALGORITHMS)}")
    return text


def _version(version: int | str) -> str:
    if isinstance(version, bool) or not isinstance(version, (int, str)):
        raise TypeError(f"version must be an int or 'latest', not {type(version).__name__}")
    return "latest" if version in (-1, "-1", "latest") else str(int(version))


def _b(flag: bool) -> str:
    return "true" if flag else "false"


class DekCore:
    """The DEK registry's operations and caches, shared by the sync and async clients.

    KEKs are cached by ``(name, deleted)`` and DEKs by ``(kek, subject, version,
    algorithm, deleted)`` (``latest`` too, forgotten when this client registers a DEK of
    the subject, as confluent-kafka's client does), each in an LRU of ``capacity``.
    """

    def __init__(self, capacity: int = 1000) -> None:
        self._lock = threading.Lock()
        self._keks: LRUCache[Hashable, Kek] = LRUCache(capacity)
        self._deks: LRUCache[Hashable, Dek] = LRUCache(capacity)

    def _get(self, cache: LRUCache[Hashable, T], key: Hashable) -> T | None:
        with self._lock:
            return cache.get(key)

    def _put(self, cache: LRUCache[Hashable, T], key: Hashable, value: T) -> None:
        with self._lock:
            cache[key] = value

    def clear_caches(self) -> None:
        """Forget every cached KEK and DEK."""
        with self._lock:
            self._keks.clear()
            self._deks.clear()

    def _forget_kek(self, name: str) -> None:
        with self._lock:
            for key in [k for k in self._keks if k[0] == name]:  # type: ignore[index]
                self._keks.pop(key, None)
            for key in [k for k in self._deks if k[0] == name]:  # type: ignore[index]
                self._deks.pop(key, None)

    def _forget_dek(self, kek_name: str, subject: str) -> None:
        with self._lock:
            for key in [k for k in self._deks
                        if k[0] == kek_name and k[1] == subject]:  # type: ignore[index]
                self._deks.pop(key, None)

    # ------------------------------------------------------------------ KEKs
    def register_kek(self, name: str, kms_type: str, kms_key_id: str, shared: bool = False,
                     kms_props: Mapping[str, str] | None = None, doc: str | None = None
                     ) -> Op[Kek]:
        hit = self._get(self._keks, (name, False))
        if hit is not None:
            return hit
        body: dict[str, Any] = {"name": name, "kmsType": kms_type, "kmsKeyId": kms_key_id,
                                "shared": bool(shared)}
        if kms_props is not None:
            body["kmsProps"] = dict(kms_props)
        if doc is not None:
            body["doc"] = doc
        data = yield Call("POST", _ROOT, (), body)
        kek: Kek = _shape("kek", Kek.from_dict, data)
        self._put(self._keks, (name, False), kek)
        return kek

    def get_kek(self, name: str, deleted: bool = False) -> Op[Kek]:
        hit = self._get(self._keks, (name, deleted))
        if hit is not None:
            return hit
        data = yield Call("GET", f"{_ROOT}/{_q(name)}", (("deleted", _b(deleted)),))
        kek: Kek = _shape("kek", Kek.from_dict, data)
        self._put(self._keks, (name, deleted), kek)
        return kek

    def get_kek_names(self, deleted: bool = False, subject_prefix: str | None = None
                      ) -> Op[list[str]]:
        params = [("deleted", _b(deleted))]
        if subject_prefix:
            params.append(("subjectPrefix", subject_prefix))
        data = yield Call("GET", _ROOT, tuple(params))
        return [str(n) for n in data]

    def update_kek(self, name: str, kms_props: Mapping[str, str] | None = None,
                   doc: str | None = None, shared: bool | None = None) -> Op[Kek]:
        body: dict[str, Any] = {}
        if kms_props is not None:
            body["kmsProps"] = dict(kms_props)
        if doc is not None:
            body["doc"] = doc
        if shared is not None:
            body["shared"] = bool(shared)
        data = yield Call("PUT", f"{_ROOT}/{_q(name)}", (), body)
        kek: Kek = _shape("kek", Kek.from_dict, data)
        self._forget_kek(name)
        self._put(self._keks, (name, False), kek)
        return kek

    def delete_kek(self, name: str, permanent: bool = False) -> Op[None]:
        yield Call("DELETE", f"{_ROOT}/{_q(name)}", (("permanent", _b(permanent)),))
        self._forget_kek(name)

    def undelete_kek(self, name: str) -> Op[None]:
        yield Call("POST", f"{_ROOT}/{_q(name)}/undelete")
        self._forget_kek(name)

    # ------------------------------------------------------------------ DEKs
    def register_dek(self, kek_name: str, subject: str,
                     encrypted_key_material: str | None = None,
                     algorithm: str = "AES256_GCM", version: int = 1) -> Op[Dek]:
        algorithm = _algorithm(algorithm)
        key = (kek_name, subject, _version(version), algorithm, False)
        hit = self._get(self._deks, key)
        if hit is not None:
            return hit
        body: dict[str, Any] = {"subject": subject, "version": int(version),
                                "algorithm": algorithm}
        if encrypted_key_material is not None:
            body["encryptedKeyMaterial"] = encrypted_key_material
        try:
            data = yield Call("POST", f"{_ROOT}/{_q(kek_name)}/deks/{_q(subject)}", (), body)
        except SchemaRegistryError as e:
            if e.http_status_code != 405:
                raise
            # Registries before the subject-in-path form take the older one.
            data = yield Call("POST", f"{_ROOT}/{_q(kek_name)}/deks", (), body)
        dek: Dek = _shape("dek", Dek.from_dict, data)
        self._forget_dek(kek_name, subject)  # "latest" changed
        self._put(self._deks, key, dek)
        return dek

    def get_dek(self, kek_name: str, subject: str, algorithm: str = "AES256_GCM",
                version: int | str = 1, deleted: bool = False) -> Op[Dek]:
        algorithm = _algorithm(algorithm)
        ver = _version(version)
        key = (kek_name, subject, ver, algorithm, deleted)
        hit = self._get(self._deks, key)
        if hit is not None:
            return hit
        data = yield Call("GET", f"{_ROOT}/{_q(kek_name)}/deks/{_q(subject)}/versions/{ver}",
                          (("algorithm", algorithm), ("deleted", _b(deleted))))
        dek: Dek = _shape("dek", Dek.from_dict, data)
        self._put(self._deks, key, dek)
        return dek

    def get_dek_subjects(self, kek_name: str, deleted: bool = False) -> Op[list[str]]:
        data = yield Call("GET", f"{_ROOT}/{_q(kek_name)}/deks", (("deleted", _b(deleted)),))
        return [str(s) for s in data]

    def get_dek_versions(self, kek_name: str, subject: str, algorithm: str = "AES256_GCM",
                         deleted: bool = False) -> Op[list[int]]:
        algorithm = _algorithm(algorithm)
        data = yield Call("GET", f"{_ROOT}/{_q(kek_name)}/deks/{_q(subject)}/versions",
                          (("algorithm", algorithm), ("deleted", _b(deleted))))
        return [int(v) for v in data]

    def delete_dek(self, kek_name: str, subject: str, algorithm: str | None = None,
                   permanent: bool = False) -> Op[None]:
        params = [("permanent", _b(permanent))]
        if algorithm is not None:
            params.append(("algorithm", _algorithm(algorithm)))
        yield Call("DELETE", f"{_ROOT}/{_q(kek_name)}/deks/{_q(subject)}", tuple(params))
        self._forget_dek(kek_name, subject)

    def delete_dek_version(self, kek_name: str, subject: str, version: int,
                           algorithm: str = "AES256_GCM", permanent: bool = False) -> Op[None]:
        yield Call("DELETE", f"{_ROOT}/{_q(kek_name)}/deks/{_q(subject)}/versions/"
                   f"{_version(version)}", (("permanent", _b(permanent)),
                                            ("algorithm", _algorithm(algorithm))))
        self._forget_dek(kek_name, subject)

    def undelete_dek(self, kek_name: str, subject: str, algorithm: str | None = None
                     ) -> Op[None]:
        params = () if algorithm is None else (("algorithm", _algorithm(algorithm)),)
        yield Call("POST", f"{_ROOT}/{_q(kek_name)}/deks/{_q(subject)}/undelete", params)
        self._forget_dek(kek_name, subject)

    def undelete_dek_version(self, kek_name: str, subject: str, version: int,
                             algorithm: str = "AES256_GCM") -> Op[None]:
        yield Call("POST", f"{_ROOT}/{_q(kek_name)}/deks/{_q(subject)}/versions/"
                   f"{_version(version)}/undelete", (("algorithm", _algorithm(algorithm)),))
        self._forget_dek(kek_name, subject)


_DOC = """
    Every operation raises :class:`~kontrakt.errors.SchemaRegistryError` as the most
    specific class for the registry's code: ``KeyNotFoundError`` (404 / 40470),
    ``KeyExistsError`` (409 / 40971), ``InvalidKeyError`` (422 / 42271),
    ``KeyReferenceExistsError`` (422 / 42272), ``KeyNotSoftDeletedError`` (404 / 40471),
    ``KeySoftDeletedError`` (404 / 40472), ``DekGenerationError`` (500 / 50070),
    ``InvalidVersionError`` (422 / 42202), or ``RegistryConnectionError`` when no URL
    answered; retries, fail-over and timeouts are the registry client's.
"""


class DekRegistryClient:
    """The DEK registry client (thread-safe), over a :class:`SchemaRegistryClient`'s
    transport.

    Args:
        config: registry client properties (``url``, auth, TLS, timeouts, retries: those of
            :class:`~kontrakt.registry.SchemaRegistryClient`); ignored when ``client`` is
            given.
        client: an existing sync registry client whose connections, auth and retries to use
            (a ``MockSchemaRegistryClient`` works too); not closed by :meth:`close`.
        **options: snake_case properties.

    Raises:
        ConfigError: unknown or invalid property.
    """

    __doc__ = (__doc__ or "") + _DOC

    def __init__(self, config: Mapping[str, Any] | None = None, *,
                 client: SchemaRegistryClient | None = None, **options: Any) -> None:
        self._owned = client is None
        self._client = client if client is not None else SchemaRegistryClient(config, **options)
        self._core = DekCore()

    def _run(self, op: Op[T]) -> T:
        return self._client._run(op)

    def close(self) -> None:
        """Close the connections, if this client opened them (idempotent)."""
        if self._owned:
            self._client.close()

    def __enter__(self) -> DekRegistryClient:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def clear_caches(self) -> None:
        """Forget every cached KEK and DEK."""
        self._core.clear_caches()

    def register_kek(self, name: str, kms_type: str, kms_key_id: str, shared: bool = False,
                     kms_props: Mapping[str, str] | None = None, doc: str | None = None
                     ) -> Kek:
        """Create a KEK (cached; an equal KEK already there answers 409, KeyExistsError).

        Args:
            name: a letter or ``_``, then letters, digits, ``_``, ``-`` (64 at most).
            kms_type: the KMS (``local-kms``, ``aws-kms``, ``gcp-kms``, ``azure-kms``,
                ``hcvault``).
            kms_key_id: the key's id in that KMS.
            shared: let the registry make and unwrap DEKs with the KMS itself.
            kms_props: properties for the KMS driver.
            doc: a description.
        """
        return self._run(self._core.register_kek(name, kms_type, kms_key_id, shared,
                                                 kms_props, doc))

    def get_kek(self, name: str, deleted: bool = False) -> Kek:
        """A KEK by name (``deleted``: soft-deleted ones too); cached."""
        return self._run(self._core.get_kek(name, deleted))

    def get_kek_names(self, deleted: bool = False, subject_prefix: str | None = None
                      ) -> list[str]:
        """The KEK names (those with a DEK for a subject starting with ``subject_prefix``)."""
        return self._run(self._core.get_kek_names(deleted, subject_prefix))

    def update_kek(self, name: str, kms_props: Mapping[str, str] | None = None,
                   doc: str | None = None, shared: bool | None = None) -> Kek:
        """Change a KEK's ``kmsProps``, ``doc`` or ``shared`` (its KMS key stays)."""
        return self._run(self._core.update_kek(name, kms_props, doc, shared))

    def delete_kek(self, name: str, permanent: bool = False) -> None:
        """Soft-delete a KEK (``permanent``: remove a soft-deleted one); its DEKs must be
        deleted first (KeyReferenceExistsError)."""
        self._run(self._core.delete_kek(name, permanent))

    def undelete_kek(self, name: str) -> None:
        """Undelete a soft-deleted KEK."""
        self._run(self._core.undelete_kek(name))

    def register_dek(self, kek_name: str, subject: str,
                     encrypted_key_material: str | None = None,
                     algorithm: str = "AES256_GCM", version: int = 1) -> Dek:
        """Create a DEK (cached). ``encrypted_key_material``: the key wrapped by the KEK,
        base64; None only for a shared KEK, whose registry makes the key."""
        return self._run(self._core.register_dek(kek_name, subject, encrypted_key_material,
                                                 algorithm, version))

    def get_dek(self, kek_name: str, subject: str, algorithm: str = "AES256_GCM",
                version: int | str = 1, deleted: bool = False) -> Dek:
        """A DEK by version (``"latest"`` or -1 for the newest); cached."""
        return self._run(self._core.get_dek(kek_name, subject, algorithm, version, deleted))

    def get_dek_subjects(self, kek_name: str, deleted: bool = False) -> list[str]:
        """The subjects with DEKs under ``kek_name``."""
        return self._run(self._core.get_dek_subjects(kek_name, deleted))

    def get_dek_versions(self, kek_name: str, subject: str, algorithm: str = "AES256_GCM",
                         deleted: bool = False) -> list[int]:
        """The versions of a subject's DEK."""
        return self._run(self._core.get_dek_versions(kek_name, subject, algorithm, deleted))

    def delete_dek(self, kek_name: str, subject: str, algorithm: str | None = None,
                   permanent: bool = False) -> None:
        """Soft-delete (``permanent``: remove) every version of a subject's DEK."""
        self._run(self._core.delete_dek(kek_name, subject, algorithm, permanent))

    def delete_dek_version(self, kek_name: str, subject: str, version: int,
                           algorithm: str = "AES256_GCM", permanent: bool = False) -> None:
        """Soft-delete (``permanent``: remove) one version of a subject's DEK."""
        self._run(self._core.delete_dek_version(kek_name, subject, version, algorithm,
                                                permanent))

    def undelete_dek(self, kek_name: str, subject: str, algorithm: str | None = None) -> None:
        """Undelete every version of a subject's DEK."""
        self._run(self._core.undelete_dek(kek_name, subject, algorithm))

    def undelete_dek_version(self, kek_name: str, subject: str, version: int,
                             algorithm: str = "AES256_GCM") -> None:
        """Undelete one version of a subject's DEK."""
        self._run(self._core.undelete_dek_version(kek_name, subject, version, algorithm))


class AsyncDekRegistryClient:
    """The asyncio form of :class:`DekRegistryClient` (same arguments and methods, awaited),
    over an :class:`~kontrakt.registry.AsyncSchemaRegistryClient`'s transport."""

    __doc__ = (__doc__ or "") + _DOC

    def __init__(self, config: Mapping[str, Any] | None = None, *,
                 client: AsyncSchemaRegistryClient | None = None, **options: Any) -> None:
        self._owned = client is None
        self._client = (client if client is not None
                        else AsyncSchemaRegistryClient(config, **options))
        self._core = DekCore()

    async def _run(self, op: Op[T]) -> T:
        return await self._client._run(op)

    async def close(self) -> None:
        """Close the connections, if this client opened them (idempotent)."""
        if self._owned:
            await self._client.close()

    async def __aenter__(self) -> AsyncDekRegistryClient:
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None,
                        exc: BaseException | None, tb: TracebackType | None) -> None:
        await self.close()

    def clear_caches(self) -> None:
        """Forget every cached KEK and DEK."""
        self._core.clear_caches()

    async def register_kek(self, name: str, kms_type: str, kms_key_id: str,
                           shared: bool = False, kms_props: Mapping[str, str] | None = None,
                           doc: str | None = None) -> Kek:
        """See :meth:`DekRegistryClient.register_kek`."""
        return await self._run(self._core.register_kek(name, kms_type, kms_key_id, shared,
                                                       kms_props, doc))

    async def get_kek(self, name: str, deleted: bool = False) -> Kek:
        """See :meth:`DekRegistryClient.get_kek`."""
        return await self._run(self._core.get_kek(name, deleted))

    async def get_kek_names(self, deleted: bool = False, subject_prefix: str | None = None
                            ) -> list[str]:
        """See :meth:`DekRegistryClient.get_kek_names`."""
        return await self._run(self._core.get_kek_names(deleted, subject_prefix))

    async def update_kek(self, name: str, kms_props: Mapping[str, str] | None = None,
                         doc: str | None = None, shared: bool | None = None) -> Kek:
        """See :meth:`DekRegistryClient.update_kek`."""
        return await self._run(self._core.update_kek(name, kms_props, doc, shared))

    async def delete_kek(self, name: str, permanent: bool = False) -> None:
        """See :meth:`DekRegistryClient.delete_kek`."""
        await self._run(self._core.delete_kek(name, permanent))

    async def undelete_kek(self, name: str) -> None:
        """See :meth:`DekRegistryClient.undelete_kek`."""
        await self._run(self._core.undelete_kek(name))

    async def register_dek(self, kek_name: str, subject: str,
                           encrypted_key_material: str | None = None,
                           algorithm: str = "AES256_GCM", version: int = 1) -> Dek:
        """See :meth:`DekRegistryClient.register_dek`."""
        return await self._run(self._core.register_dek(kek_name, subject,
                                                       encrypted_key_material, algorithm,
                                                       version))

    async def get_dek(self, kek_name: str, subject: str, algorithm: str = "AES256_GCM",
                      version: int | str = 1, deleted: bool = False) -> Dek:
        """See :meth:`DekRegistryClient.get_dek`."""
        return await self._run(self._core.get_dek(kek_name, subject, algorithm, version,
                                                  deleted))

    async def get_dek_subjects(self, kek_name: str, deleted: bool = False) -> list[str]:
        """See :meth:`DekRegistryClient.get_dek_subjects`."""
        return await self._run(self._core.get_dek_subjects(kek_name, deleted))

    async def get_dek_versions(self, kek_name: str, subject: str,
                               algorithm: str = "AES256_GCM", deleted: bool = False
                               ) -> list[int]:
        """See :meth:`DekRegistryClient.get_dek_versions`."""
        return await self._run(self._core.get_dek_versions(kek_name, subject, algorithm,
                                                           deleted))

    async def delete_dek(self, kek_name: str, subject: str, algorithm: str | None = None,
                         permanent: bool = False) -> None:
        """See :meth:`DekRegistryClient.delete_dek`."""
        await self._run(self._core.delete_dek(kek_name, subject, algorithm, permanent))

    async def delete_dek_version(self, kek_name: str, subject: str, version: int,
                                 algorithm: str = "AES256_GCM", permanent: bool = False
                                 ) -> None:
        """See :meth:`DekRegistryClient.delete_dek_version`."""
        await self._run(self._core.delete_dek_version(kek_name, subject, version, algorithm,
                                                      permanent))

    async def undelete_dek(self, kek_name: str, subject: str, algorithm: str | None = None
                           ) -> None:
        """See :meth:`DekRegistryClient.undelete_dek`."""
        await self._run(self._core.undelete_dek(kek_name, subject, algorithm))

    async def undelete_dek_version(self, kek_name: str, subject: str, version: int,
                                   algorithm: str = "AES256_GCM") -> None:
        """See :meth:`DekRegistryClient.undelete_dek_version`."""
        await self._run(self._core.undelete_dek_version(kek_name, subject, version,
                                                        algorithm))
