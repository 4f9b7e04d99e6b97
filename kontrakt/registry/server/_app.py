"""Routing of the registry's REST surface onto :class:`RegistryState`, without sockets.

``RegistryApp.handle(method, path, query, body)`` returns ``(status, json_value)``; the HTTP
server and the mock client both call it, so they answer exactly alike.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Callable
from typing import Any
from urllib.parse import parse_qs, unquote

from kontrakt.registry._errors import InvalidVersionError, SchemaRegistryError
from kontrakt.registry.server._dek import DekRoutes
from kontrakt.registry.server._state import RegistryState
from kontrakt.registry.server._tags import tag_schema
from kontrakt.registry.server._validate import SCHEMA_TYPES

__all__ = ["NO_CONTENT", "RegistryApp"]

#: A handler's answer for "204 No Content" (no body).
NO_CONTENT: Any = object()

_MAX_VERSION = 2**31 - 1
_Handler = Callable[["_Req"], Any]
#: Confluent refuses subjects holding ISO control characters (42208).
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


#: What ``/v1/metadata/id`` names the registry (Confluent's default group id is
#: ``schema-registry``; an embedded registry stores no Kafka cluster id).
_CLUSTER_ID = "kontrakt-embedded-registry"


def _version() -> str:
    from kontrakt import __version__

    return __version__


def _subject_param(raw: str) -> str:
    """A percent-decoded subject name from one path segment.

    Raises:
        SchemaRegistryError: (422, 42208) the name is not valid UTF-8 or holds control
            characters; refusing them keeps two spellings from naming one subject.
    """
    try:
        name = unquote(raw, errors="strict")
    except UnicodeDecodeError:
        name = ""
    else:
        if not _CONTROL.search(name):
            return name
    raise SchemaRegistryError(422, 42208, f"The specified subject '{raw}' is not a valid.")


class _Req:
    __slots__ = ("args", "body", "query")

    def __init__(self, args: tuple[str, ...], query: dict[str, list[str]], body: Any) -> None:
        self.args = args
        self.query = query
        self.body = body

    def q(self, name: str, default: str | None = None) -> str | None:
        vals = self.query.get(name)
        return vals[-1] if vals else default

    def flag(self, name: str) -> bool:
        # confluent-kafka sends Python's str(bool): "True"/"False".
        return (self.q(name) or "false").strip().lower() == "true"

    def deleted_only(self) -> bool:
        # Confluent's current name is deletedOnly; older servers and clients say deleted_only.
        return self.flag("deletedOnly") or self.flag("deleted_only")

    def int_q(self, name: str, default: int) -> int:
        raw = self.q(name)
        try:
            return int(raw) if raw is not None else default
        except ValueError:
            raise SchemaRegistryError(
                400, 400, f"Query parameter {name} must be an integer") from None


def parse_version(raw: str) -> int | None:
    """``latest``/``-1`` → None, ``1..2^31-1`` → int.

    Raises:
        InvalidVersionError: anything else (code 42202).
    """
    if raw == "latest" or raw == "-1":
        return None
    if re.fullmatch(r"[0-9]+", raw):
        value = int(raw)
        if 1 <= value <= _MAX_VERSION:
            return value
    raise InvalidVersionError(
        422, 42202, f"The specified version '{raw}' is not a valid version id. Allowed "
        "values are between [1, 2^31-1] and the string \"latest\"")


def _page(items: list[Any], req: _Req, zero_is_all: bool = False) -> list[Any]:
    offset = max(req.int_q("offset", 0), 0)
    limit = req.int_q("limit", -1)
    items = items[offset:]
    # GET /schemas ignores a limit of 0 too ("ignored if not positive" in Confluent's code).
    return items if limit < 0 or (zero_is_all and limit == 0) else items[:limit]


class RegistryApp:
    """The registry's request handler.

    Args:
        state: the registry data and rules.

    Attributes:
        request_count: number of requests handled (tests use it to prove caching).
    """

    def __init__(self, state: RegistryState) -> None:
        self.state = state
        self.request_count = 0
        self._count_lock = threading.Lock()
        s = "{s}"  # a subject name
        v = "{v}"  # any other path parameter
        self._routes: list[tuple[str, list[str], _Handler, bool]] = []
        add = self._add
        # Handlers marked "own lock" take RegistryState.lock themselves, and not while a
        # schema is compiled or checked; the others run wholly under it.
        own = True
        add("GET", "", lambda r: {})
        add("GET", "schemas", lambda r: _page(self.state.list_schemas(
            r.q("subjectPrefix") or "", r.flag("deleted"), r.flag("latestOnly")), r,
            zero_is_all=True))
        add("GET", "schemas/types", lambda r: list(SCHEMA_TYPES))
        add("GET", f"schemas/ids/{v}", self._schema_by_id, own)
        add("GET", f"schemas/ids/{v}/schema", lambda r: self._schema_by_id(r)["schema"], own)
        add("GET", f"schemas/ids/{v}/subjects", self._id_subjects)
        add("GET", f"schemas/ids/{v}/versions", self._id_versions)
        add("GET", f"schemas/guids/{v}", self._schema_by_guid, own)
        add("GET", f"schemas/guids/{v}/ids", lambda r: self.state.guid_ids(r.args[0]))
        add("GET", "subjects", self._subjects)
        add("POST", f"subjects/{s}", lambda r: self.state.lookup(
            r.args[0], r.body, r.flag("normalize"), r.flag("deleted")), own)
        add("DELETE", f"subjects/{s}", lambda r: self.state.delete_subject(
            r.args[0], r.flag("permanent")), own)
        add("GET", f"subjects/{s}/versions", lambda r: _page(self.state.versions(
            r.args[0], r.flag("deleted"), r.deleted_only(), r.flag("deletedAsNegative")), r))
        add("POST", f"subjects/{s}/versions", lambda r: self.state.register(
            r.args[0], r.body, r.flag("normalize")), own)
        add("GET", f"subjects/{s}/versions/{v}", self._get_version, own)
        add("GET", f"subjects/{s}/versions/{v}/schema",
            lambda r: self._get_version(r)["schema"], own)
        add("DELETE", f"subjects/{s}/versions/{v}", lambda r: self.state.delete_version(
            r.args[0], parse_version(r.args[1]), r.flag("permanent")), own)
        add("POST", f"subjects/{s}/versions/{v}/tags", lambda r: tag_schema(
            self.state, r.args[0], parse_version(r.args[1]), r.body), own)
        add("GET", f"subjects/{s}/versions/{v}/referencedby", lambda r: _page(
            self.state.referenced_by(r.args[0], parse_version(r.args[1])), r))
        add("GET", f"subjects/{s}/metadata", self._with_metadata, own)
        add("POST", f"compatibility/subjects/{s}/versions/{v}", lambda r: (
            self.state.test_compatibility(r.args[0], parse_version(r.args[1]), False, r.body,
                                          r.flag("normalize"), r.flag("verbose"))), own)
        add("POST", f"compatibility/subjects/{s}/versions", lambda r: (
            self.state.test_compatibility(r.args[0], None, True, r.body,
                                          r.flag("normalize"), r.flag("verbose"))), own)
        add("GET", "config", lambda r: self.state.get_config(None, True))
        add("PUT", "config", lambda r: self.state.set_config(None, r.body))
        add("DELETE", "config", lambda r: self.state.delete_config(None))
        add("GET", f"config/{s}", lambda r: self.state.get_config(
            r.args[0], r.flag("defaultToGlobal")))
        add("PUT", f"config/{s}", lambda r: self.state.set_config(r.args[0], r.body))
        add("DELETE", f"config/{s}", lambda r: self.state.delete_config(r.args[0]))
        add("GET", "mode", lambda r: self.state.get_mode(None, True))
        add("PUT", "mode", lambda r: self.state.set_mode(None, r.body, r.flag("force")))
        add("DELETE", "mode", lambda r: self.state.delete_mode(None))
        add("GET", f"mode/{s}", lambda r: self.state.get_mode(
            r.args[0], r.flag("defaultToGlobal")))
        add("PUT", f"mode/{s}", lambda r: self.state.set_mode(
            r.args[0], r.body, r.flag("force")))
        add("DELETE", f"mode/{s}", lambda r: self.state.delete_mode(r.args[0]))
        add("GET", "contexts", lambda r: _page([
            c for c in self.state.context_names() if c.startswith(r.q("contextPrefix") or "")],
            r))
        # Confluent's server metadata: clients and tools read the cluster id and version.
        add("GET", "v1/metadata/id", lambda r: {"id": "", "scope": {"path": [], "clusters": {
            "kafka-cluster": "", "schema-registry-cluster": _CLUSTER_ID}}})
        add("GET", "v1/metadata/version", lambda r: {"version": _version(), "commitId": ""})
        add("DELETE", f"contexts/{v}", self._delete_context)
        #: the DEK registry (``/dek-registry/v1``); ``dek.kms_config`` for shared KEKs
        self.dek = DekRoutes(state)
        for method, pattern, handler, own_lock in self.dek.routes():
            add(method, pattern, handler, own_lock)

    def _add(self, method: str, pattern: str, handler: _Handler, own_lock: bool = False
             ) -> None:
        self._routes.append((method, pattern.split("/") if pattern else [], handler,
                             own_lock))

    # ---------------------------------------------------------------- handlers
    @staticmethod
    def _schema_id(raw: str) -> int:
        if not re.fullmatch(r"-?[0-9]{1,10}", raw):
            raise SchemaRegistryError(404, 404, "HTTP 404 Not Found")
        return int(raw)

    def _fmt(self, r: _Req, out: Any, subject: str | None) -> Any:
        # ?format=serialized: a Protobuf schema as a base64 FileDescriptorProto;
        # ?format=resolved: an Avro schema with its references written into it.
        return self.state.formatted(out, subject, r.q("format"))

    def _schema_by_id(self, r: _Req) -> Any:
        subject = r.q("subject")
        with self.state.lock:
            out = self.state.schema_by_id(self._schema_id(r.args[0]), subject)
            if r.flag("fetchMaxId"):
                out["maxId"] = self.state.max_id(subject)
        return self._fmt(r, out, subject)

    def _delete_context(self, r: _Req) -> Any:
        self.state.delete_context(r.args[0])
        return NO_CONTENT

    def _schema_by_guid(self, r: _Req) -> Any:
        with self.state.lock:
            out = self.state.schema_by_guid(r.args[0])
        return self._fmt(r, out, None)

    def _get_version(self, r: _Req) -> Any:
        version = parse_version(r.args[1])
        with self.state.lock:
            out = self.state.get_version(r.args[0], version, r.flag("deleted"))
        return self._fmt(r, out, r.args[0])

    def _id_subjects(self, r: _Req) -> Any:
        pairs = self.state.id_usages(self._schema_id(r.args[0]), r.q("subject"),
                                     r.flag("deleted"))
        return _page(sorted({s for s, _ in pairs}), r)

    def _id_versions(self, r: _Req) -> Any:
        pairs = self.state.id_usages(self._schema_id(r.args[0]), r.q("subject"),
                                     r.flag("deleted"))
        return _page([{"subject": s, "version": v} for s, v in pairs], r)

    def _subjects(self, r: _Req) -> Any:
        return _page(self.state.subjects(r.q("subjectPrefix") or "", r.flag("deleted"),
                                         r.deleted_only()), r)

    def _with_metadata(self, r: _Req) -> Any:
        keys = r.query.get("key", [])
        values = r.query.get("value", [])
        if len(keys) != len(values):
            raise SchemaRegistryError(422, 422, "key and value parameters must pair up")
        with self.state.lock:
            out = self.state.latest_with_metadata(
                r.args[0], dict(zip(keys, values, strict=True)), r.flag("deleted"))
        return self._fmt(r, out, r.args[0])

    # ---------------------------------------------------------------- entry point
    def handle(self, method: str, path: str, query: str, body: bytes | None
               ) -> tuple[int, Any]:
        """Answer one request.

        Args:
            method: HTTP method.
            path: URL path (percent-encoded, as received).
            query: raw query string.
            body: request body bytes, or None.

        Returns:
            ``(http_status, json_value)``; errors are ``{"error_code", "message"}`` bodies
            with Confluent's codes.
        """
        with self._count_lock:
            self.request_count += 1
        try:
            out = self._dispatch(method.upper(), path, query, body)
            return (204, None) if out is NO_CONTENT else (200, out)
        except SchemaRegistryError as exc:
            return exc.http_status_code, {"error_code": exc.error_code,
                                          "message": exc.error_message}
        except Exception as exc:  # a bug must still answer in the registry's error shape
            return 500, {"error_code": 50001, "message": f"Internal error: {exc!r}"}

    def _dispatch(self, method: str, path: str, query: str, body: bytes | None) -> Any:
        # Match raw segments first and decode parameters after, so that an encoded "/" or
        # NUL in a subject can never be read as a path separator or alias another name.
        raw = path.strip("/")
        segments = raw.split("/") if raw else []
        parsed: Any = None
        if body:
            try:
                parsed = json.loads(body)
            except ValueError as exc:
                raise SchemaRegistryError(400, 400, f"Malformed JSON body: {exc}") from None
        qs = parse_qs(query, keep_blank_values=True)
        allowed = False
        for m, pattern, handler, own_lock in self._routes:
            if len(pattern) != len(segments):
                continue
            params = []
            for want, got in zip(pattern, segments, strict=True):
                if want in ("{s}", "{v}"):
                    if not got:
                        break
                    params.append((want, got))
                elif want != got:
                    break
            else:
                allowed = True
                if m != method:
                    continue
                args = tuple(_subject_param(got) if kind == "{s}" else unquote(got)
                             for kind, got in params)
                req = _Req(args, qs, parsed)
                if own_lock:
                    return handler(req)
                with self.state.lock:
                    return handler(req)
        if allowed:
            raise SchemaRegistryError(405, 405, "HTTP 405 Method Not Allowed")
        raise SchemaRegistryError(404, 404, "HTTP 404 Not Found")
