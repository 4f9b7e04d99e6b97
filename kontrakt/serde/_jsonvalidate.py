"""A compiled JSON Schema validator for the common keywords, with jsonschema as fallback.

``compile_validator`` turns a schema into nested closures once; validating a record is then
plain function calls and ``isinstance`` checks, several times faster than ``jsonschema``'s
general validator on typical event schemas. A schema that uses anything this compiler does not
implement (or an old draft with different rules) gets ``None``, and the caller uses jsonschema;
so the choice never changes which documents are accepted.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["Check", "compile_validator"]

#: ``check(value) -> None`` when valid, else a message saying what is wrong and where.
Check = Callable[[Any], "str | None"]

# Keywords that do not constrain values (annotations), and keywords this compiler implements.
_ANNOTATIONS = frozenset({
    "$schema", "$id", "id", "title", "description", "default", "examples", "$comment",
    "format", "readOnly", "writeOnly", "deprecated", "definitions", "$defs", "contentMediaType",
    "contentEncoding", "contentSchema",
})
_SUPPORTED = frozenset({
    "type", "properties", "required", "additionalProperties", "items", "enum", "const",
    "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "minLength", "maxLength",
    "pattern", "minItems", "maxItems", "anyOf", "oneOf", "allOf", "not", "$ref",
})
# Validation keywords we do not compile: their presence sends the schema to jsonschema.
_UNSUPPORTED = frozenset({
    "patternProperties", "dependencies", "dependentRequired", "dependentSchemas",
    "propertyNames", "if", "then", "else", "contains", "minContains", "maxContains",
    "uniqueItems", "multipleOf", "minProperties", "maxProperties", "unevaluatedProperties",
    "unevaluatedItems", "prefixItems", "additionalItems", "$dynamicRef", "$recursiveRef",
    "$anchor", "$dynamicAnchor", "$recursiveAnchor", "$vocabulary", "divisibleBy", "extends",
    "disallow",
})


class _Unsupported(Exception):
    pass


def _is_int(x: Any) -> bool:
    t = type(x)
    return t is int or (t is float and x.is_integer()) or (
        isinstance(x, int) and not isinstance(x, bool))


def _is_num(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


_TYPES: dict[str, Callable[[Any], bool]] = {
    "null": lambda x: x is None,
    "boolean": lambda x: isinstance(x, bool),
    "integer": _is_int,
    "number": _is_num,
    "string": lambda x: isinstance(x, str),
    "array": lambda x: isinstance(x, list),
    "object": lambda x: isinstance(x, dict),
}


def _json_equal(a: Any, b: Any) -> bool:
    # JSON equality: booleans are not numbers, 1 == 1.0, containers compare deeply.
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_json_equal(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_json_equal(x, y) for x, y in zip(a, b, strict=True))
    if _is_num(a) and _is_num(b):
        return bool(a == b)
    return type(a) is type(b) and bool(a == b)


def _all(checks: list[Check]) -> Check:
    if not checks:
        return lambda x: None
    if len(checks) == 1:
        return checks[0]

    def run(x: Any) -> str | None:
        for c in checks:
            e = c(x)
            if e is not None:
                return e
        return None
    return run


class _Compiler:
    def __init__(self, root: Any, documents: Mapping[str, Any]) -> None:
        self.root = root
        self.documents = documents
        self.cache: dict[tuple[int, str], Check] = {}

    def ref(self, doc: Any, ref: str) -> Check:
        target_doc = doc
        name, _, fragment = ref.partition("#")
        if name:
            if name not in self.documents:
                raise _Unsupported(f"$ref {ref!r}")
            target_doc = self.documents[name]
        key = (id(target_doc), fragment)
        hit = self.cache.get(key)
        if hit is not None:
            return hit
        node: Any = target_doc
        if fragment:
            if not fragment.startswith("/"):
                raise _Unsupported(f"$ref {ref!r}")
            for part in fragment[1:].split("/"):
                part = part.replace("~1", "/").replace("~0", "~")
                if isinstance(node, list) and part.isdigit():
                    node = node[int(part)]
                elif isinstance(node, dict) and part in node:
                    node = node[part]
                else:
                    raise _Unsupported(f"$ref {ref!r}")
        cell: list[Check] = []

        def forward(x: Any) -> str | None:
            return cell[0](x)
        self.cache[key] = forward  # recursive schemas find the cell while it is being built
        cell.append(self.compile(node, target_doc))
        return cell[0]

    def compile(self, s: Any, doc: Any) -> Check:
        if s is True or s == {}:
            return lambda x: None
        if s is False:
            return lambda x: "no value is allowed here"
        if not isinstance(s, dict):
            raise _Unsupported("schema is not an object")
        keys = set(s)
        bad = keys & _UNSUPPORTED
        if bad:
            raise _Unsupported(", ".join(sorted(bad)))
        checks: list[Check] = []
        if "$ref" in s:
            # Drafts before 2019-09 ignore siblings of $ref; later ones apply both. Only accept
            # the unambiguous case.
            if keys - _ANNOTATIONS - {"$ref"}:
                raise _Unsupported("$ref with sibling keywords")
            return self.ref(doc, s["$ref"])
        if "type" in s:
            checks.append(self._type(s["type"]))
        if "enum" in s:
            options = list(s["enum"])

            def enum(x: Any) -> str | None:
                for o in options:
                    if _json_equal(x, o):
                        return None
                return f"{x!r} is not one of {options!r}"
            checks.append(enum)
        if "const" in s:
            const = s["const"]
            checks.append(lambda x: None if _json_equal(x, const) else f"{const!r} was expected")
        checks.extend(self._numeric(s))
        checks.extend(self._string(s))
        if keys & {"properties", "required", "additionalProperties"}:
            checks.append(self._object(s, doc))
        if keys & {"items", "minItems", "maxItems"}:
            checks.append(self._array(s, doc))
        for word in ("allOf", "anyOf", "oneOf"):
            if word in s:
                checks.append(self._combine(word, [self.compile(sub, doc) for sub in s[word]]))
        if "not" in s:
            inner = self.compile(s["not"], doc)
            checks.append(lambda x: "must not match the 'not' schema" if inner(x) is None
                          else None)
        return _all(checks)

    @staticmethod
    def _type(t: Any) -> Check:
        names = [t] if isinstance(t, str) else list(t)
        preds = []
        for n in names:
            if n not in _TYPES:
                raise _Unsupported(f"type {n!r}")
            preds.append(_TYPES[n])
        if len(preds) == 1:
            p = preds[0]
            want = names[0]
            return lambda x: None if p(x) else f"{x!r} is not of type {want!r}"
        return lambda x: None if any(p(x) for p in preds) else f"{x!r} is not of type {names!r}"

    @staticmethod
    def _numeric(s: Mapping[str, Any]) -> list[Check]:
        out: list[Check] = []
        for word, fails, text in (
            ("minimum", lambda x, b: x < b, "less than the minimum"),
            ("maximum", lambda x, b: x > b, "greater than the maximum"),
            ("exclusiveMinimum", lambda x, b: x <= b, "not greater than the exclusive minimum"),
            ("exclusiveMaximum", lambda x, b: x >= b, "not less than the exclusive maximum"),
        ):
            if word in s:
                bound = s[word]
                if not _is_num(bound):
                    raise _Unsupported(f"{word} {bound!r}")  # draft-04 boolean form

                def check(x: Any, bound: Any = bound, fails: Any = fails,
                          text: str = text) -> str | None:
                    if _is_num(x) and fails(x, bound):
                        return f"{x!r} is {text} {bound!r}"
                    return None
                out.append(check)
        return out

    @staticmethod
    def _string(s: Mapping[str, Any]) -> list[Check]:
        out: list[Check] = []
        if "minLength" in s:
            lo = s["minLength"]
            out.append(lambda x: f"{x!r} is shorter than {lo}"
                       if isinstance(x, str) and len(x) < lo else None)
        if "maxLength" in s:
            hi = s["maxLength"]
            out.append(lambda x: f"{x!r} is longer than {hi}"
                       if isinstance(x, str) and len(x) > hi else None)
        if "pattern" in s:
            try:
                rx = re.compile(s["pattern"])
            except re.error as e:
                raise _Unsupported(f"pattern {s['pattern']!r}") from e
            out.append(lambda x: f"{x!r} does not match {rx.pattern!r}"
                       if isinstance(x, str) and rx.search(x) is None else None)
        return out

    def _object(self, s: Mapping[str, Any], doc: Any) -> Check:
        props = {k: self.compile(v, doc) for k, v in (s.get("properties") or {}).items()}
        required = list(s.get("required") or ())
        extra = s.get("additionalProperties", True)
        extra_check = None if extra is True else (
            None if extra is False else self.compile(extra, doc))
        closed = extra is False

        def obj(x: Any) -> str | None:
            if not isinstance(x, dict):
                return None
            for name in required:
                if name not in x:
                    return f"{name!r} is a required property"
            for k, v in x.items():
                sub = props.get(k)
                if sub is not None:
                    e = sub(v)
                    if e is not None:
                        return f"{k}: {e}"
                elif closed:
                    return f"additional property {k!r} is not allowed"
                elif extra_check is not None:
                    e = extra_check(v)
                    if e is not None:
                        return f"{k}: {e}"
            return None
        return obj

    def _array(self, s: Mapping[str, Any], doc: Any) -> Check:
        items = s.get("items")
        if isinstance(items, list):
            raise _Unsupported("items as a list")
        item = None if items is None else self.compile(items, doc)
        lo = s.get("minItems")
        hi = s.get("maxItems")

        def arr(x: Any) -> str | None:
            if not isinstance(x, list):
                return None
            if lo is not None and len(x) < lo:
                return f"array has fewer than {lo} items"
            if hi is not None and len(x) > hi:
                return f"array has more than {hi} items"
            if item is not None:
                for i, v in enumerate(x):
                    e = item(v)
                    if e is not None:
                        return f"[{i}]: {e}"
            return None
        return arr

    @staticmethod
    def _combine(word: str, subs: list[Check]) -> Check:
        if word == "allOf":
            return _all(subs)
        if word == "anyOf":
            def any_of(x: Any) -> str | None:
                for c in subs:
                    if c(x) is None:
                        return None
                return f"{x!r} matches none of the anyOf schemas"
            return any_of

        def one_of(x: Any) -> str | None:
            n = sum(1 for c in subs if c(x) is None)
            return None if n == 1 else f"{x!r} matches {n} of the oneOf schemas, not exactly 1"
        return one_of


def compile_validator(schema: Any, documents: Mapping[str, Any] | None = None) -> Check | None:
    """Compile ``schema`` into a check function, or ``None`` if it needs the general validator.

    Args:
        schema: the JSON Schema (draft 6 or later; booleans allowed).
        documents: other schemas a ``$ref`` may name (registry references), by name.

    Returns:
        ``check(value) -> None | error message``, or ``None`` when the schema uses keywords or
        drafts this compiler does not implement.
    """
    if isinstance(schema, dict):
        draft = str(schema.get("$schema", ""))
        if "draft-03" in draft or "draft-04" in draft:
            return None  # integer/exclusive* rules differ; leave them to jsonschema
    try:
        return _Compiler(schema, documents or {}).compile(schema, schema)
    except _Unsupported:
        return None
    except (TypeError, ValueError, KeyError, RecursionError):
        return None
