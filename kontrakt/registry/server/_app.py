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
from kontrakt.registry.server._state import RegistryState
from kontrakt.registry.server._validate import SCHEMA_TYPES

__all__ = ["RegistryApp"]

_MAX_VERSION = 2**31 - 1
_Handler = Callable[["_Req"], Any]


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


def _page(items: list[Any], req: _Req) -> list[Any]:
    offset = max(req.int_q("offset", 0), 0)
    limit = req.int_q("limit", -1)
    items = items[offset:]
    return items if limit < 0 else items[:limit]


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
        s = "([^/]+)"
        self._routes: list[tuple[str, re.Pattern[str], _Handler]] = []
        add = self._add
        add("GET", "", lambda r: {})
        add("GET", "schemas/types", lambda r: list(SCHEMA_TYPES))
        add("GET", f"schemas/ids/{s}", self._schema_by_id)
        add("GET", f"schemas/ids/{s}/schema", lambda r: self._schema_by_id(r)["schema"])
        add("GET", f"schemas/ids/{s}/subjects", self._id_subjects)
        add("GET", f"schemas/ids/{s}/versions", self._id_versions)
        add("GET", f"schemas/guids/{s}", lambda r: self._fmt(
            r, self.state.schema_by_guid(r.args[0]), None))
        add("GET", "subjects", self._subjects)
        add("POST", f"subjects/{s}", lambda r: self.state.lookup(
            r.args[0], r.body, r.flag("normalize"), r.flag("deleted")))
        add("DELETE", f"subjects/{s}", lambda r: self.state.delete_subject(
            r.args[0], r.flag("permanent")))
        add("GET", f"subjects/{s}/versions", lambda r: _page(self.state.versions(
            r.args[0], r.flag("deleted"), r.flag("deleted_only")), r))
        add("POST", f"subjects/{s}/versions", lambda r: self.state.register(
            r.args[0], r.body, r.flag("normalize")))
        add("GET", f"subjects/{s}/versions/{s}", self._get_version)
        add("GET", f"subjects/{s}/versions/{s}/schema",
            lambda r: self._get_version(r)["schema"])
        add("DELETE", f"subjects/{s}/versions/{s}", lambda r: self.state.delete_version(
            r.args[0], parse_version(r.args[1]), r.flag("permanent")))
        add("GET", f"subjects/{s}/versions/{s}/referencedby", lambda r: _page(
            self.state.referenced_by(r.args[0], parse_version(r.args[1])), r))
        add("GET", f"subjects/{s}/metadata", self._with_metadata)
        add("POST", f"compatibility/subjects/{s}/versions/{s}", lambda r: (
            self.state.test_compatibility(r.args[0], parse_version(r.args[1]), False, r.body,
                                          r.flag("normalize"), r.flag("verbose"))))
        add("POST", f"compatibility/subjects/{s}/versions", lambda r: (
            self.state.test_compatibility(r.args[0], None, True, r.body,
                                          r.flag("normalize"), r.flag("verbose"))))
        add("GET", "config", lambda r: self.state.get_config(None, True))
        add("PUT", "config", lambda r: self.state.set_config(None, r.body))
        add("DELETE", "config", lambda r: self.state.delete_config(None))
        add("GET", f"config/{s}", lambda r: self.state.get_config(
            r.args[0], r.flag("defaultToGlobal")))
        add("PUT", f"config/{s}", lambda r: self.state.set_config(r.args[0], r.body))
        add("DELETE", f"config/{s}", lambda r: self.state.delete_config(r.args[0]))
        add("GET", "mode", lambda r: self.state.get_mode(None, True))
        add("PUT", "mode", lambda r: self.state.set_mode(None, r.body, r.flag("force")))
        add("GET", f"mode/{s}", lambda r: self.state.get_mode(
            r.args[0], r.flag("defaultToGlobal")))
        add("PUT", f"mode/{s}", lambda r: self.state.set_mode(
            r.args[0], r.body, r.flag("force")))
        add("DELETE", f"mode/{s}", lambda r: self.state.delete_mode(r.args[0]))
        add("GET", "contexts", lambda r: _page(self.state.context_names(), r))

    def _add(self, method: str, pattern: str, handler: _Handler) -> None:
        self._routes.append((method, re.compile(pattern + r"/?"), handler))

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
        return self._fmt(r, self.state.schema_by_id(self._schema_id(r.args[0]), subject),
                         subject)

    def _get_version(self, r: _Req) -> Any:
        out = self.state.get_version(r.args[0], parse_version(r.args[1]), r.flag("deleted"))
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
                                         r.flag("deleted_only")), r)

    def _with_metadata(self, r: _Req) -> Any:
        keys = r.query.get("key", [])
        values = r.query.get("value", [])
        if len(keys) != len(values):
            raise SchemaRegistryError(422, 422, "key and value parameters must pair up")
        out = self.state.latest_with_metadata(r.args[0], dict(zip(keys, values, strict=True)),
                                              r.flag("deleted"))
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
            return 200, self._dispatch(method.upper(), path, query, body)
        except SchemaRegistryError as exc:
            return exc.http_status_code, {"error_code": exc.error_code,
                                          "message": exc.error_message}
        except Exception as exc:  # a bug must still answer in the registry's error shape
            return 500, {"error_code": 50001, "message": f"Internal error: {exc!r}"}

    def _dispatch(self, method: str, path: str, query: str, body: bytes | None) -> Any:
        # Split before unquoting so an encoded "/" in a subject stays part of the name.
        parts = [unquote(p) for p in path.strip("/").split("/")] if path.strip("/") else []
        rel = "/".join(p.replace("/", "\x00") for p in parts)
        parsed: Any = None
        if body:
            try:
                parsed = json.loads(body)
            except ValueError as exc:
                raise SchemaRegistryError(400, 400, f"Malformed JSON body: {exc}") from None
        qs = parse_qs(query, keep_blank_values=True)
        allowed = False
        for m, rx, handler in self._routes:
            match = rx.fullmatch(rel)
            if match is None:
                continue
            allowed = True
            if m != method:
                continue
            args = tuple(a.replace("\x00", "/") for a in match.groups())
            req = _Req(args, qs, parsed)
            with self.state.lock:
                return handler(req)
        if allowed:
            raise SchemaRegistryError(405, 405, "HTTP 405 Method Not Allowed")
        raise SchemaRegistryError(404, 404, "HTTP 404 Not Found")
