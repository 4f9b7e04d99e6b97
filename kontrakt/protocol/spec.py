"""How Kafka messages are declared: fields, version ranges, flexible versions and tags.

Each API is declared once, as data, with :func:`api`; it returns a request and a response
class spanning every version. Example::

    MetadataRequest, MetadataResponse = api(
        3, "Metadata", valid="0-13", flexible="9+",
        request=[
            F("topics", A(S("MetadataRequestTopic",
                F("topic_id", "uuid", v="10+"),
                F("name", "string", nullable="10+"),
            )), nullable="1+"),
            F("allow_auto_topic_creation", "bool", v="4+", default=True),
        ],
        response=[...],
    )

Types are the strings ``bool int8 int16 uint16 int32 uint32 int64 float64 string bytes uuid
records``, a struct declared with :func:`S`, or an array :func:`A` of either. Version ranges are
``"0+"``, ``"3-7"``, ``"5"`` or ``"none"``.

Messages are plain objects built with keywords (``MetadataRequest(topics=None)``). Every field
has a default; fields the chosen version cannot carry must stay at their default unless
declared ``ignorable``, otherwise encoding raises :class:`kontrakt.errors.UnsupportedVersionError`.
Unknown tagged fields met while decoding are kept in ``unknown_tags`` and written back.
"""

from __future__ import annotations

import keyword
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Final

__all__ = [
    "PRIMITIVES",
    "UNKNOWN_AUTHORIZED_OPERATIONS",
    "A",
    "ApiSpec",
    "ArrayType",
    "F",
    "Field",
    "Request",
    "Response",
    "S",
    "Struct",
    "StructType",
    "TypeSpec",
    "VersionRange",
    "api",
    "registry",
]

PRIMITIVES: Final = frozenset(
    {"bool", "int8", "int16", "uint16", "int32", "uint32", "int64", "float64",
     "string", "bytes", "uuid", "records"}
)

#: The default of every ``*_authorized_operations`` field (KIP-430): not asked for, or not
#: known.
UNKNOWN_AUTHORIZED_OPERATIONS: Final = -(2**31)

_ZERO_UUID = uuid.UUID(int=0)


@dataclass(frozen=True, slots=True)
class VersionRange:
    """An inclusive range of versions; ``hi`` of None means unbounded, ``lo`` > ``hi`` empty."""

    lo: int
    hi: int | None

    @classmethod
    def parse(cls, text: str) -> VersionRange:
        """Parse ``"0+"``, ``"3-7"``, ``"5"`` or ``"none"``."""
        text = text.strip()
        if text == "none":
            return cls(1, 0)
        if text.endswith("+"):
            return cls(int(text[:-1]), None)
        if "-" in text:
            lo, hi = text.split("-")
            return cls(int(lo), int(hi))
        v = int(text)
        return cls(v, v)

    def __contains__(self, version: object) -> bool:
        if not isinstance(version, int):
            return False
        return self.lo <= version and (self.hi is None or version <= self.hi)

    @property
    def empty(self) -> bool:
        return self.hi is not None and self.lo > self.hi

    def __str__(self) -> str:
        if self.empty:
            return "none"
        if self.hi is None:
            return f"{self.lo}+"
        return f"{self.lo}-{self.hi}" if self.lo != self.hi else str(self.lo)


NONE_RANGE: Final = VersionRange(1, 0)
ALL_RANGE: Final = VersionRange(0, None)


@dataclass(frozen=True, slots=True)
class ArrayType:
    """An array of ``item``."""

    item: TypeSpec


@dataclass(frozen=True, slots=True, eq=False)
class StructType:
    """A struct: a name (used for the generated class) and its fields in wire order."""

    name: str
    fields: tuple[Field, ...]


TypeSpec = str | StructType | ArrayType


class _Missing:
    def __repr__(self) -> str:
        return "MISSING"


MISSING: Final = _Missing()


@dataclass(frozen=True, slots=True)
class Field:
    """One field of a struct.

    Attributes:
        name: Python attribute name (snake_case).
        type: a primitive name, :class:`StructType` or :class:`ArrayType`.
        versions: versions that carry the field.
        nullable: versions in which it may be null.
        tag: tag number when the field is a tagged field.
        tagged: versions in which it is sent as a tagged field.
        default: value when absent.
        ignorable: if True, a non-default value is silently dropped by versions that
            cannot carry it instead of raising.
        about: one line on what it means.
    """

    name: str
    type: TypeSpec
    versions: VersionRange = ALL_RANGE
    nullable: VersionRange = NONE_RANGE
    tag: int | None = None
    tagged: VersionRange = NONE_RANGE
    default: Any = MISSING
    ignorable: bool = False
    about: str = ""

    def default_value(self) -> Any:
        """A fresh default value (arrays get a new list each call)."""
        if self.default is not MISSING:
            d = self.default
            return list(d) if isinstance(d, list) else d
        if isinstance(self.type, StructType) and self.nullable.empty:
            # As in Kafka: a struct that cannot be null defaults to one of its defaults.
            return struct_class(self.type)()
        return zero_value(self.type)


def zero_value(t: TypeSpec) -> Any:
    """The value a field of type ``t`` takes when nothing else is declared."""
    if isinstance(t, ArrayType):
        return []
    if isinstance(t, StructType):
        return None
    if t == "bool":
        return False
    if t in ("int8", "int16", "uint16", "int32", "uint32", "int64"):
        return 0
    if t == "float64":
        return 0.0
    if t == "string":
        return ""
    if t == "bytes":
        return b""
    if t == "uuid":
        return _ZERO_UUID
    if t == "records":
        return None
    raise ValueError(f"unknown type {t!r}")


def F(
    name: str,
    type: TypeSpec,
    v: str = "0+",
    *,
    nullable: str = "none",
    tag: int | None = None,
    tagged: str | None = None,
    default: Any = MISSING,
    ignorable: bool = False,
    about: str = "",
) -> Field:
    """Declare a field. ``v`` is the version range carrying it; for a tagged field give
    ``tag`` and ``tagged`` (defaults to ``v``)."""
    if isinstance(type, str) and type not in PRIMITIVES:
        raise ValueError(f"field {name!r}: unknown type {type!r}")
    return Field(
        name=name,
        type=type,
        versions=VersionRange.parse(v),
        nullable=VersionRange.parse(nullable),
        tag=tag,
        tagged=VersionRange.parse(tagged if tagged is not None else v)
        if tag is not None
        else NONE_RANGE,
        default=default,
        ignorable=ignorable,
        about=about,
    )


def S(name: str, *fields: Field) -> StructType:
    """Declare a struct type named ``name`` with ``fields`` in wire order."""
    seen: set[str] = set()
    for f in fields:
        if f.name in seen:
            raise ValueError(f"struct {name}: duplicate field {f.name!r}")
        seen.add(f.name)
    return StructType(name, tuple(fields))


def A(item: TypeSpec) -> ArrayType:
    """Declare an array of ``item``."""
    return ArrayType(item)


class Struct:
    """Base of every generated message and nested-struct class.

    Instances are mutable plain objects with one slot per declared field plus
    ``unknown_tags`` (tagged fields this version of Kontrakt does not know, kept verbatim).
    """

    __slots__ = ("unknown_tags",)
    FIELDS: ClassVar[tuple[Field, ...]] = ()
    STRUCT: ClassVar[StructType]

    # Tagged fields this version of Kontrakt does not know, by tag (flexible versions).
    # The generated classes' own fields are typed in kontrakt/protocol/messages/__init__.pyi
    # (generated by kontrakt/protocol/_stubgen.py).
    unknown_tags: dict[int, bytes] | None

    def __init__(self, **kwargs: Any) -> None:
        for f in self.FIELDS:
            if f.name in kwargs:
                object.__setattr__(self, f.name, kwargs.pop(f.name))
            else:
                object.__setattr__(self, f.name, f.default_value())
        object.__setattr__(self, "unknown_tags", kwargs.pop("unknown_tags", None))
        if kwargs:
            names = ", ".join(sorted(kwargs))
            raise TypeError(f"{type(self).__name__} has no field(s) {names}")

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        return all(
            getattr(self, f.name) == getattr(other, f.name) for f in self.FIELDS
        ) and (self.unknown_tags or None) == (other.unknown_tags or None)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        parts = ", ".join(f"{f.name}={getattr(self, f.name)!r}" for f in self.FIELDS)
        return f"{type(self).__name__}({parts})"

    def to_dict(self) -> dict[str, Any]:
        """A plain dict of the fields, nested structs included (for logging and tests)."""
        return {f.name: _plain(getattr(self, f.name)) for f in self.FIELDS}


def _plain(value: Any) -> Any:
    if isinstance(value, Struct):
        return value.to_dict()
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


class Request(Struct):
    """Base of request messages. Class attributes describe the API."""

    __slots__ = ()
    API_KEY: ClassVar[int]
    API_NAME: ClassVar[str]
    VALID_VERSIONS: ClassVar[VersionRange]
    FLEXIBLE_VERSIONS: ClassVar[VersionRange]
    RESPONSE_TYPE: ClassVar[type[Response]]
    SPEC: ClassVar[ApiSpec]


class Response(Struct):
    """Base of response messages."""

    __slots__ = ()
    API_KEY: ClassVar[int]
    API_NAME: ClassVar[str]
    VALID_VERSIONS: ClassVar[VersionRange]
    FLEXIBLE_VERSIONS: ClassVar[VersionRange]
    REQUEST_TYPE: ClassVar[type[Request]]
    SPEC: ClassVar[ApiSpec]


@dataclass(frozen=True, slots=True, eq=False)
class ApiSpec:
    """Everything declared about one API."""

    key: int
    name: str
    valid: VersionRange
    flexible: VersionRange
    request: StructType
    response: StructType
    request_class: type[Request]
    response_class: type[Response]


_REGISTRY: dict[int, ApiSpec] = {}


def registry() -> dict[int, ApiSpec]:
    """Every declared API by key (importing :mod:`kontrakt.protocol.messages` fills it)."""
    return _REGISTRY


def _no_fields(self: Struct, extra: dict[str, Any]) -> None:
    names = ", ".join(sorted(extra))
    raise TypeError(f"{type(self).__name__} has no field(s) {names}")


def _make_init(st: StructType) -> Callable[..., None] | None:
    """Struct.__init__ written out for one class: keyword arguments with the fields'
    defaults, no loop over FIELDS. Messages are built per request (a Produce request is
    three), so the generic loop showed in every round trip. None when a field's name cannot
    be a keyword argument (then the generic __init__ serves)."""
    names = [f.name for f in st.fields]
    reserved = {"self", "unknown_tags", "_extra"}
    if any(not n.isidentifier() or keyword.iskeyword(n) or n in reserved or n.startswith("_d")
           for n in names):
        return None
    env: dict[str, Any] = {"_M": MISSING, "_no_fields": _no_fields}
    params = []
    body = []
    for i, f in enumerate(st.fields):
        params.append(f"{f.name}=_M")
        value = f.default_value()
        if isinstance(value, (list, Struct)):
            # Each instance needs its own (Field.default_value makes a new one a call).
            env[f"_d{i}"] = f.default_value
            default = f"_d{i}()"
        else:
            env[f"_d{i}"] = value
            default = f"_d{i}"
        body.append(f"    self.{f.name} = {default} if {f.name} is _M else {f.name}")
    params.append("unknown_tags=None")
    body.append("    self.unknown_tags = unknown_tags")
    body.append("    if _extra:\n        _no_fields(self, _extra)")
    src = f"def __init__(self, *, {', '.join(params)}, **_extra):\n" + "\n".join(body) + "\n"
    exec(compile(src, f"<kontrakt init {st.name}>", "exec"), env)
    init: Callable[..., None] = env["__init__"]
    return init


def _make_class(st: StructType, base: type[Struct], owner: dict[str, type[Struct]]) -> type[Struct]:
    ns: dict[str, Any] = {
        "__slots__": tuple(f.name for f in st.fields),
        "FIELDS": st.fields,
        "STRUCT": st,
        "__module__": "kontrakt.protocol.messages",
    }
    init = _make_init(st)
    if init is not None:
        ns["__init__"] = init
    cls = type(st.name, (base,), ns)
    for f in st.fields:
        inner: TypeSpec = f.type
        while isinstance(inner, ArrayType):
            inner = inner.item
        if isinstance(inner, StructType):
            nested = _class_for(inner, owner)
            # Nested struct classes are reachable from the class that holds them,
            # e.g. ``MetadataRequest.MetadataRequestTopic``.
            setattr(cls, inner.name, nested)
    return cls


def _class_for(st: StructType, owner: dict[str, type[Struct]]) -> type[Struct]:
    # Struct types are identified by object identity: the same declaration reused across
    # APIs (a "common struct") yields one class per API family, cached in ``owner``.
    key = f"{st.name}@{id(st)}"
    cls = owner.get(key)
    if cls is None:
        cls = _make_class(st, Struct, owner)
        owner[key] = cls
    return cls


_STRUCT_CLASSES: dict[str, type[Struct]] = {}


def struct_class(st: StructType) -> type[Struct]:
    """The generated class for a nested struct declaration."""
    return _class_for(st, _STRUCT_CLASSES)


def api(
    key: int,
    name: str,
    *,
    valid: str,
    flexible: str,
    request: Sequence[Field],
    response: Sequence[Field],
) -> tuple[type[Request], type[Response]]:
    """Declare an API and return its (request class, response class).

    Args:
        key: the API key.
        name: the API name (``"Produce"``); classes are named ``<name>Request``/``Response``.
        valid: versions this declaration covers.
        flexible: versions using compact encodings and tagged fields.
        request: the request's top-level fields.
        response: the response's top-level fields.
    """
    if key in _REGISTRY:
        raise ValueError(f"API key {key} declared twice ({_REGISTRY[key].name}, {name})")
    valid_r = VersionRange.parse(valid)
    flex_r = VersionRange.parse(flexible)
    req_st = S(f"{name}Request", *request)
    resp_st = S(f"{name}Response", *response)
    for st in (req_st, resp_st):
        _check_tags(st, flex_r)
    req_cls = _make_class(req_st, Request, _STRUCT_CLASSES)
    resp_cls = _make_class(resp_st, Response, _STRUCT_CLASSES)
    spec = ApiSpec(key, name, valid_r, flex_r, req_st, resp_st,
                   req_cls, resp_cls)  # type: ignore[arg-type]
    for cls in (req_cls, resp_cls):
        cls.API_KEY = key  # type: ignore[attr-defined]
        cls.API_NAME = name  # type: ignore[attr-defined]
        cls.VALID_VERSIONS = valid_r  # type: ignore[attr-defined]
        cls.FLEXIBLE_VERSIONS = flex_r  # type: ignore[attr-defined]
        cls.SPEC = spec  # type: ignore[attr-defined]
    req_cls.RESPONSE_TYPE = resp_cls  # type: ignore[attr-defined]
    resp_cls.REQUEST_TYPE = req_cls  # type: ignore[attr-defined]
    _REGISTRY[key] = spec
    return req_cls, resp_cls  # type: ignore[return-value]


def _check_tags(st: StructType, flexible: VersionRange) -> None:
    tags: set[int] = set()
    for f in st.fields:
        if f.tag is not None:
            if f.tag in tags:
                raise ValueError(f"{st.name}: tag {f.tag} used twice")
            tags.add(f.tag)
            if f.tagged.lo < flexible.lo:
                raise ValueError(f"{st.name}.{f.name}: tagged before flexible versions")
        inner: TypeSpec = f.type
        while isinstance(inner, ArrayType):
            inner = inner.item
        if isinstance(inner, StructType):
            _check_tags(inner, flexible)
