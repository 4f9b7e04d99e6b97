"""The DEK registry of the embedded server: ``/dek-registry/v1/...``, as Confluent's.

Key encryption keys (KEKs) name a key held by a KMS (``kmsType`` + ``kmsKeyId``); data
encryption keys (DEKs) are per (KEK, subject, algorithm, version) and stored encrypted by
their KEK (``encryptedKeyMaterial``). The registry never sees a KMS key. For a KEK that is
not ``shared`` the client generates and wraps each DEK itself; for a ``shared`` KEK the
registry does both (and hands the raw ``keyMaterial`` back on reads), which it can only do
when it reaches the KMS: here through the KMS drivers of
:mod:`kontrakt.serde.rules.encryption_kms` (the ``encryption`` extra) configured with
:attr:`DekRoutes.kms_config`, otherwise it answers 500 / 50070 as Confluent's does.

Statuses and error codes are Confluent's: 404 / 40470 no such key, 404 / 40471 a permanent
delete of a key not soft-deleted first, 404 / 40472 a key that must be undeleted first,
409 / 40971 the key exists, 422 / 42271 invalid or missing key info, 422 / 42272 a KEK that
still has DEKs, 422 / 42202 an invalid version, 500 / 50070 a DEK the registry could not
generate. Every change is one journal operation (:class:`DekStore`), so the keys persist
with the rest of the registry.
"""

from __future__ import annotations

import base64
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from kontrakt.registry._errors import SchemaRegistryError

if TYPE_CHECKING:
    from kontrakt.registry.server._state import RegistryState

__all__ = ["ALGORITHMS", "DekRoutes", "DekStore"]

ALGORITHMS = ("AES128_GCM", "AES256_GCM", "AES256_SIV")
_NAME_MAX = 64
_MAX_VERSION = 2**31 - 1

_DekKey = tuple[str, str, str, int]  # kek name, subject, algorithm, version


@dataclass
class DekStore:
    """The KEKs and DEKs of a registry (part of ``Store``); changed only by :meth:`apply`."""

    keks: dict[str, dict[str, Any]] = field(default_factory=dict)
    deks: dict[_DekKey, dict[str, Any]] = field(default_factory=dict)

    def apply(self, op: dict[str, Any]) -> None:
        """Apply one journal operation (``kek``, ``drop_kek``, ``dek``, ``drop_dek``).

        Raises:
            KeyError, TypeError, ValueError: a malformed operation (a corrupt journal).
        """
        kind = op["op"]
        if kind == "kek":
            rec = dict(op["rec"])
            self.keks[str(rec["name"])] = rec
        elif kind == "drop_kek":
            self.keks.pop(str(op["name"]), None)
        elif kind == "dek":
            rec = dict(op["rec"])
            self.deks[_dek_key(rec)] = rec
        elif kind == "drop_dek":
            self.deks.pop((str(op["kek"]), str(op["subject"]), str(op["algorithm"]),
                           int(op["version"])), None)
        else:
            raise ValueError(f"unknown journal operation {kind!r}")

    def snapshot_ops(self) -> list[dict[str, Any]]:
        """Operations that rebuild this from empty."""
        return ([{"op": "kek", "rec": rec} for rec in self.keks.values()]
                + [{"op": "dek", "rec": rec} for rec in self.deks.values()])


#: the journal operations :class:`DekStore` applies
OPS = frozenset(("kek", "drop_kek", "dek", "drop_dek"))


def _dek_key(rec: dict[str, Any]) -> _DekKey:
    return (str(rec["kekName"]), str(rec["subject"]), str(rec["algorithm"]),
            int(rec["version"]))


_DEFAULT_QUALIFIER = ":.:"


def _now_ms() -> int:
    return int(time.time() * 1000)


def _not_found(name: str) -> SchemaRegistryError:
    return SchemaRegistryError(404, 40470, f"Key '{name}' not found")


def _invalid(what: str) -> SchemaRegistryError:
    return SchemaRegistryError(422, 42271, f"Invalid or missing key info: {what}")


def _exists(name: str) -> SchemaRegistryError:
    return SchemaRegistryError(409, 40971, f"Key '{name}' already exists; use a different "
                                           "value")


def check_name(name: Any) -> str:
    """A KEK name as Confluent accepts it: a letter or ``_``, then letters, digits, ``_`` and
    ``-``, at most 64 characters.

    Raises:
        SchemaRegistryError: 422 / 42271 otherwise.
    """
    if not isinstance(name, str) or not name or len(name) > _NAME_MAX:
        raise _invalid("name")
    if not (name[0].isalpha() or name[0] == "_") or not all(
            c.isalnum() or c in "_-" for c in name[1:]):
        raise _invalid("name")
    return name


def _check_subject(subject: Any) -> str:
    if not isinstance(subject, str) or not subject or any(
            ord(c) < 0x20 or 0x7f <= ord(c) <= 0x9f for c in subject):
        raise _invalid("subject")
    # A subject qualified with the default context (":.:s") is the DEK of "s", as
    # Confluent's DEK registry orders and finds them; other contexts' subjects keep their
    # qualifier and so their own DEKs.
    if subject.startswith(_DEFAULT_QUALIFIER) and len(subject) > len(_DEFAULT_QUALIFIER):
        return subject[len(_DEFAULT_QUALIFIER):]
    return subject


def _algorithm(raw: str | None) -> str:
    if raw is None or raw == "":
        return "AES256_GCM"
    if raw not in ALGORITHMS:
        raise SchemaRegistryError(400, 400, f"Unknown algorithm {raw!r}; one of "
                                            f"{', '.join(ALGORITHMS)}")
    return raw


def _version(raw: str) -> int | None:
    """``latest`` / ``-1`` → None; ``1..2^31-1`` → int; anything else 422 / 42202."""
    from kontrakt.registry.server._app import parse_version

    return parse_version(raw)


def _kek_view(rec: dict[str, Any]) -> dict[str, Any]:
    out = {"name": rec["name"], "kmsType": rec["kmsType"], "kmsKeyId": rec["kmsKeyId"],
           "kmsProps": dict(rec.get("kmsProps") or {}), "shared": bool(rec["shared"]),
           "ts": rec["ts"], "deleted": bool(rec["deleted"])}
    if rec.get("doc") is not None:
        out["doc"] = rec["doc"]
    return out


def _dek_view(rec: dict[str, Any], key_material: str | None = None) -> dict[str, Any]:
    out = {"kekName": rec["kekName"], "subject": rec["subject"], "version": rec["version"],
           "algorithm": rec["algorithm"], "encryptedKeyMaterial": rec["encryptedKeyMaterial"],
           "ts": rec["ts"], "deleted": bool(rec["deleted"])}
    if key_material is not None:
        out["keyMaterial"] = key_material
    return out


class DekRoutes:
    """The ``/dek-registry/v1`` handlers over a :class:`RegistryState`'s ``DekStore``.

    Args:
        state: the registry state (its lock, journal and store).

    Attributes:
        kms_config: the KMS drivers' config for ``shared`` KEKs (e.g. ``{"secret": ...}`` for
            the local KMS, which otherwise reads the ``LOCAL_SECRET`` environment variable);
            without a driver that can reach the KEK's KMS, creating or reading a DEK of a
            shared KEK answers 500 / 50070. The KMS is called outside the registry's lock
            (other requests go on meanwhile); a remote KMS driver should still bound its
            own calls, as each holds a server worker.
    """

    def __init__(self, state: RegistryState) -> None:
        self.state = state
        self.kms_config: dict[str, Any] = {}

    @property
    def _store(self) -> DekStore:
        return self.state.store.dek

    def routes(self) -> list[tuple[str, str, Callable[[Any], Any], bool]]:
        """``(method, pattern, handler, own lock)`` for the app's router (``{v}``: a path
        parameter; handlers with ``own lock`` take the registry's lock themselves)."""
        root = "dek-registry/v1/keks"
        k = f"{root}/{{v}}"
        d = f"{k}/deks/{{v}}"
        own = True  # takes the lock itself, calling a KMS outside it
        return [
            ("GET", root, self._list_keks, False),
            ("POST", root, self._create_kek, False),
            ("GET", k, self._get_kek, False),
            ("PUT", k, self._update_kek, False),
            ("DELETE", k, self._delete_kek, False),
            ("POST", f"{k}/undelete", self._undelete_kek, False),
            ("GET", f"{k}/deks", self._list_subjects, False),
            ("POST", f"{k}/deks", lambda r: self._create_dek(r, None), own),
            ("POST", d, lambda r: self._create_dek(r, r.args[1]), own),
            ("GET", d, lambda r: self._get_dek(r, None), own),
            ("DELETE", d, lambda r: self._delete_deks(r, None), False),
            ("POST", f"{d}/undelete", lambda r: self._undelete_deks(r, None), False),
            ("GET", f"{d}/versions", self._list_versions, False),
            ("GET", f"{d}/versions/{{v}}", lambda r: self._get_dek(r, r.args[2]), own),
            ("DELETE", f"{d}/versions/{{v}}", lambda r: self._delete_deks(r, r.args[2]),
             False),
            ("POST", f"{d}/versions/{{v}}/undelete",
             lambda r: self._undelete_deks(r, r.args[2]), False),
        ]

    # ---------------------------------------------------------------- helpers
    def _kek(self, name: str, deleted: bool) -> dict[str, Any]:
        rec = self._store.keks.get(name)
        if rec is None or (rec["deleted"] and not deleted):
            raise _not_found(name)
        return rec

    def _deks(self, kek: str, subject: str | None, algorithm: str | None,
              deleted: bool) -> list[dict[str, Any]]:
        """The DEKs of ``kek`` (and ``subject`` / ``algorithm``), by version."""
        found = [rec for (k, s, a, _), rec in self._store.deks.items()
                 if k == kek and (subject is None or s == subject)
                 and (algorithm is None or a == algorithm) and (deleted or not rec["deleted"])]
        return sorted(found, key=lambda rec: (rec["subject"], rec["algorithm"],
                                              rec["version"]))

    def _find_dek(self, kek: str, subject: str, algorithm: str, version: int | None,
                  deleted: bool) -> dict[str, Any] | None:
        if version is None:
            found = self._deks(kek, subject, algorithm, deleted)
            return found[-1] if found else None
        rec = self._store.deks.get((kek, subject, algorithm, version))
        return rec if rec is not None and (deleted or not rec["deleted"]) else None

    def _aead(self, kek: dict[str, Any]) -> Any:
        """The KEK's AEAD through a KMS driver, for shared KEKs.

        Raises:
            SchemaRegistryError: 500 / 50070 when no driver reaches the KMS.
        """
        try:
            from kontrakt.serde.rules.encryption_kms import kek_aead

            return kek_aead(kek["kmsType"], kek["kmsKeyId"],
                            {**self.kms_config, **(kek.get("kmsProps") or {})})
        except Exception as e:
            raise SchemaRegistryError(500, 50070, f"Could not reach the KMS of key "
                                                  f"'{kek['name']}': {e}") from None

    def _raw_dek(self, kek: dict[str, Any], rec: dict[str, Any]) -> str | None:
        """The base64 raw key material of a shared KEK's DEK (None for other KEKs)."""
        if not kek["shared"]:
            return None
        aead = self._aead(kek)
        try:
            raw = aead.decrypt(base64.b64decode(rec["encryptedKeyMaterial"]), b"")
        except Exception as e:
            raise SchemaRegistryError(500, 50070, f"Could not generate raw dek for "
                                                  f"{rec['subject']}: {e}") from None
        return base64.b64encode(raw).decode()

    # ---------------------------------------------------------------- KEKs
    def _list_keks(self, r: Any) -> Any:
        deleted = r.flag("deleted")
        prefixes = r.query.get("subjectPrefix") or []
        names = sorted(n for n, rec in self._store.keks.items() if deleted or not rec["deleted"])
        if prefixes:
            names = [n for n in names if any(
                s.startswith(p) for p in prefixes for (k, s, _, _) in self._store.deks
                if k == n)]
        return names

    def _get_kek(self, r: Any) -> Any:
        return _kek_view(self._kek(check_name(r.args[0]), r.flag("deleted")))

    def _create_kek(self, r: Any) -> Any:
        body = r.body if isinstance(r.body, dict) else {}
        name = check_name(body.get("name"))
        if not body.get("kmsKeyId") or not isinstance(body.get("kmsKeyId"), str):
            raise _invalid("kmsKeyId")
        if not isinstance(body.get("kmsType"), str) or not body["kmsType"]:
            raise _invalid("kmsType")
        props = body.get("kmsProps") or {}
        if not isinstance(props, dict):
            raise _invalid("kmsProps")
        new = {"name": name, "kmsType": body["kmsType"], "kmsKeyId": body["kmsKeyId"],
               "kmsProps": {str(k): str(v) for k, v in sorted(props.items())},
               "doc": body.get("doc"), "shared": bool(body.get("shared", False)),
               "deleted": bool(body.get("deleted", False))}
        old = self._store.keks.get(name)
        # As Confluent's: a create acts as an undelete of an equal deleted KEK; otherwise an
        # existing KEK (equal or not) is a conflict, which clients read as "use the stored".
        if old is not None and (old["deleted"] == new["deleted"] or not _same_kek(old, new)):
            raise _exists(name)
        new["ts"] = _now_ms()
        self.state._commit([{"op": "kek", "rec": new}])
        return _kek_view(new)

    def _update_kek(self, r: Any) -> Any:
        name = check_name(r.args[0])
        body = r.body if isinstance(r.body, dict) else {}
        old = self._kek(name, False)
        new = dict(old)
        if "kmsProps" in body:
            props = body["kmsProps"] or {}
            if not isinstance(props, dict):
                raise _invalid("kmsProps")
            new["kmsProps"] = {str(k): str(v) for k, v in sorted(props.items())}
        if "doc" in body:
            new["doc"] = body["doc"]
        if "shared" in body:
            new["shared"] = bool(body["shared"])
        if _same_kek(old, new):
            return _kek_view(old)
        new["ts"] = _now_ms()
        self.state._commit([{"op": "kek", "rec": new}])
        return _kek_view(new)

    def _delete_kek(self, r: Any) -> Any:
        from kontrakt.registry.server._app import NO_CONTENT

        name = check_name(r.args[0])
        permanent = r.flag("permanent")
        old = self._kek(name, True)
        if self._deks(name, None, None, permanent):
            raise SchemaRegistryError(422, 42272, f"Key '{name}' still has data encryption "
                                                  "keys; delete them first")
        if permanent:
            if not old["deleted"]:
                raise SchemaRegistryError(404, 40471, f"Key '{name}' was not deleted first "
                                                      "before being permanently deleted")
            self.state._commit([{"op": "drop_kek", "name": name}])
        elif not old["deleted"]:
            self.state._commit([{"op": "kek", "rec": {**old, "deleted": True,
                                                      "ts": _now_ms()}}])
        return NO_CONTENT

    def _undelete_kek(self, r: Any) -> Any:
        from kontrakt.registry.server._app import NO_CONTENT

        name = check_name(r.args[0])
        old = self._kek(name, True)
        if old["deleted"]:
            self.state._commit([{"op": "kek", "rec": {**old, "deleted": False,
                                                      "ts": _now_ms()}}])
        return NO_CONTENT

    # ---------------------------------------------------------------- DEKs
    def _list_subjects(self, r: Any) -> Any:
        name = check_name(r.args[0])
        deleted = r.flag("deleted")
        self._kek(name, deleted)
        return sorted({rec["subject"] for rec in self._deks(name, None, None, deleted)})

    def _list_versions(self, r: Any) -> Any:
        name, subject = check_name(r.args[0]), _check_subject(r.args[1])
        deleted = r.flag("deleted")
        self._kek(name, deleted)
        algorithm = _algorithm(r.q("algorithm"))
        return [rec["version"] for rec in self._deks(name, subject, algorithm, deleted)]

    # _get_dek and _create_dek take the registry's lock themselves and call a shared KEK's
    # KMS outside it: a slow KMS must not stall every other request.
    def _get_dek(self, r: Any, raw_version: str | None) -> Any:
        name, subject = check_name(r.args[0]), _check_subject(r.args[1])
        version = 1 if raw_version is None else _version(raw_version)
        deleted = r.flag("deleted")
        algorithm = _algorithm(r.q("algorithm"))
        with self.state.lock:
            kek = dict(self._kek(name, deleted))
            found = self._find_dek(name, subject, algorithm, version, deleted)
            rec = None if found is None else dict(found)
        if rec is None:
            raise _not_found(subject)
        return _dek_view(rec, self._raw_dek(kek, rec))

    def _create_dek(self, r: Any, path_subject: str | None) -> Any:
        name = check_name(r.args[0])
        body = r.body if isinstance(r.body, dict) else {}
        subject = _check_subject(body.get("subject", path_subject))
        if path_subject is not None and subject != _check_subject(path_subject):
            raise _invalid("subject")
        algorithm = _algorithm(body.get("algorithm"))
        version = body.get("version", 1)
        if version is None:
            version = 1
        if isinstance(version, bool) or not isinstance(version, int) or not (
                1 <= version <= _MAX_VERSION):
            raise _invalid("version")
        deleted = bool(body.get("deleted", False))
        material = body.get("encryptedKeyMaterial")
        if material is not None and (not isinstance(material, str) or not _is_b64(material)):
            raise _invalid("encryptedKeyMaterial")
        key = (name, subject, algorithm, version, deleted, material)
        with self.state.lock:
            kek, new = self._new_dek(*key)
            if new["encryptedKeyMaterial"] is not None:
                self._commit_dek(new)
        if new["encryptedKeyMaterial"] is None:  # a shared KEK's new DEK: the KMS makes it
            made = self._generate(kek, algorithm, subject)
            with self.state.lock:
                kek, new = self._new_dek(*key)  # again: another request may have made it
                if new["encryptedKeyMaterial"] is None:
                    new["encryptedKeyMaterial"] = made
                self._commit_dek(new)
        return _dek_view(new, self._raw_dek(kek, new))

    def _new_dek(self, name: str, subject: str, algorithm: str, version: int, deleted: bool,
                 material: str | None) -> tuple[dict[str, Any], dict[str, Any]]:
        """The KEK and the DEK record to store (``encryptedKeyMaterial`` None: a shared
        KEK's key still to make), or the refusal (caller holds the lock)."""
        kek = dict(self._kek(name, deleted))
        old = self._store.deks.get((name, subject, algorithm, version))
        new = {"kekName": name, "subject": subject, "version": version,
               "algorithm": algorithm, "encryptedKeyMaterial": material, "deleted": deleted}
        # As Confluent's: a create equal to a soft-deleted DEK undeletes it; any other
        # existing DEK is a conflict.
        if old is not None and (old["deleted"] == deleted or (
                material is not None and material != old["encryptedKeyMaterial"])):
            raise _exists(subject)
        if material is None:
            if not kek["shared"]:
                raise _invalid("encryptedKeyMaterial")
            if old is not None:  # an undelete of a shared KEK's DEK keeps its key
                new["encryptedKeyMaterial"] = old["encryptedKeyMaterial"]
        elif kek["shared"] and old is not None:
            raise _exists(subject)
        return kek, new

    def _commit_dek(self, new: dict[str, Any]) -> None:
        new["ts"] = _now_ms()
        self.state._commit([{"op": "dek", "rec": dict(new)}])

    def _generate(self, kek: dict[str, Any], algorithm: str, subject: str) -> str:
        aead = self._aead(kek)
        try:
            from kontrakt.serde.rules.encryption_kms import new_dek

            return base64.b64encode(aead.encrypt(new_dek(algorithm), b"")).decode()
        except Exception as e:
            raise SchemaRegistryError(500, 50070, f"Could not generate encrypted dek for "
                                                  f"{subject}: {e}") from None

    def _dek_targets(self, r: Any, name: str, subject: str, raw_version: str | None
                     ) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        """The KEK, and the DEKs a delete or undelete names: one version, or (no version)
        every version of the subject under ``?algorithm=`` (deleted ones included).

        Raises:
            SchemaRegistryError: a bad version or algorithm (422), no such KEK or DEK (404).
        """
        version = None if raw_version is None else _version(raw_version)
        kek = self._kek(name, True)
        algorithm = _algorithm(r.q("algorithm"))
        if raw_version is None:
            targets = self._deks(name, subject, r.q("algorithm") or None, True)
        else:
            one = self._find_dek(name, subject, algorithm, version, True)
            targets = [one] if one is not None else []
        if not targets:
            raise _not_found(subject)
        return kek, targets

    def _delete_deks(self, r: Any, raw_version: str | None) -> Any:
        from kontrakt.registry.server._app import NO_CONTENT

        name, subject = check_name(r.args[0]), _check_subject(r.args[1])
        permanent = r.flag("permanent")
        _, targets = self._dek_targets(r, name, subject, raw_version)
        ops: list[dict[str, Any]] = []
        for rec in targets:
            if permanent:
                if not rec["deleted"]:
                    raise SchemaRegistryError(404, 40471, f"Key '{subject}' was not deleted "
                                                          "first before being permanently "
                                                          "deleted")
                ops.append({"op": "drop_dek", "kek": name, "subject": subject,
                            "algorithm": rec["algorithm"], "version": rec["version"]})
            elif not rec["deleted"]:
                ops.append({"op": "dek", "rec": {**rec, "deleted": True, "ts": _now_ms()}})
        if ops:
            self.state._commit(ops)
        return NO_CONTENT

    def _undelete_deks(self, r: Any, raw_version: str | None) -> Any:
        from kontrakt.registry.server._app import NO_CONTENT

        name, subject = check_name(r.args[0]), _check_subject(r.args[1])
        kek, targets = self._dek_targets(r, name, subject, raw_version)
        if kek["deleted"]:
            raise SchemaRegistryError(404, 40472, f"Key '{name}' must be undeleted first")
        ops = [{"op": "dek", "rec": {**rec, "deleted": False, "ts": _now_ms()}}
               for rec in targets if rec["deleted"]]
        if ops:
            self.state._commit(ops)
        return NO_CONTENT


def _same_kek(a: dict[str, Any], b: dict[str, Any]) -> bool:
    return all(a.get(k) == b.get(k) for k in ("name", "kmsType", "kmsKeyId", "doc", "shared")) \
        and dict(a.get("kmsProps") or {}) == dict(b.get("kmsProps") or {})


def _is_b64(text: str) -> bool:
    try:
        base64.b64decode(text, validate=True)
    except ValueError:
        return False
    return True
