"""Inline tags of a Protobuf schema, rewritten for the tags endpoint as Confluent's server does.

An ``SR_FIELD`` path is ``Message.Nested.field`` (message names from the file's top level,
without the package), optionally with the field's oneof before its name
(``Message.choice.field``); a field inside a oneof is found by its name alone as well. An
``SR_RECORD`` path names a message the same way. A field's tags are the ``tags`` of its
``(confluent.field_meta)`` option, a message's those of its ``(confluent.message_meta)``
option; the option's other entries (``doc``, ``params``) are kept, and an option left with
nothing is removed.

Unlike Confluent's server, which prints the whole file anew, the ``.proto`` text is edited
in place: only the touched options change, so comments and layout survive. And since
kontrakt compiles schemas with protoc, which knows an option only through an import, the
edit adds ``import "confluent/meta.proto";`` when it writes a meta option into a file that
lacks the import (Confluent's server resolves the option without it).
"""

from __future__ import annotations

import ast
import json
from dataclasses import dataclass, field

from kontrakt.registry._errors import InvalidSchemaError
from kontrakt.registry.compatibility._proto_parser import _TOKEN
from kontrakt.registry.server._tags_json import merged_tags, retag_order

__all__ = ["retag_proto"]

_META_IMPORT = "confluent/meta.proto"
_FIELD_META = "(confluent.field_meta)"
_MESSAGE_META = "(confluent.message_meta)"
_BLOCKS = ("enum", "service", "extend")
_PAIRS = {"{": "}", "[": "]", "<": ">", "(": ")"}


def _bad(message: str) -> InvalidSchemaError:
    return InvalidSchemaError(422, 42201, message)


def _literal(token: str) -> str:
    """A string literal's value (Protobuf escapes are Python's for what tags use); the text
    between the quotes if Python cannot read it."""
    try:
        value = ast.literal_eval(token)
    except (ValueError, SyntaxError):
        return token[1:-1]
    return value if isinstance(value, str) else token[1:-1]


@dataclass(frozen=True, slots=True)
class _Tok:
    kind: str
    value: str
    start: int
    end: int


@dataclass(eq=False, slots=True)
class _Field:
    name: str
    oneof: str | None
    semicolon: int  # token index of the closing ';'
    brackets: tuple[int, int] | None  # token indexes of '[' and ']'


@dataclass(eq=False, slots=True)
class _Message:
    name: str
    open: int  # token index of '{'
    messages: dict[str, _Message] = field(default_factory=dict)
    fields: list[_Field] = field(default_factory=list)
    oneofs: set[str] = field(default_factory=set)
    options: list[tuple[int, int]] = field(default_factory=list)  # 'option' .. ';'


@dataclass(slots=True)
class _Meta:
    """A meta option being rewritten: its other entries (source text) and its tags."""

    others: list[str]
    tags: list[str]

    def text(self) -> str | None:
        if not self.others and not self.tags:
            return None
        entries = list(self.others)
        if self.tags:
            entries.append("tags: [" + ", ".join(
                json.dumps(t, ensure_ascii=False) for t in self.tags) + "]")
        return "{ " + " ".join(entries) + " }"


class _Source:
    def __init__(self, text: str) -> None:
        self.text = text
        self.toks: list[_Tok] = []
        pos = 0
        while pos < len(text):
            m = _TOKEN.match(text, pos)
            if m is None:
                raise _bad(f"Cannot read the Protobuf schema at offset {pos}")
            if m.lastgroup not in ("ws", "lc", "bc"):
                self.toks.append(_Tok(m.lastgroup or "", m.group(), pos, m.end()))
            pos = m.end()
        self.root = _Message("", -1)
        self.header_end = 0  # where an import can go: after syntax, package and imports
        self.has_meta_import = False
        self._scan_file()

    def value(self, i: int) -> str:
        return self.toks[i].value if i < len(self.toks) else ""

    def span(self, i: int, j: int) -> str:
        """The source text of tokens ``i`` to ``j`` inclusive."""
        return self.text[self.toks[i].start:self.toks[j].end]

    def close(self, i: int) -> int:
        """The index of the token closing the bracket at ``i``."""
        opening, depth = self.value(i), 0
        for j in range(i, len(self.toks)):
            v = self.toks[j].value
            depth += 1 if v == opening else -1 if v == _PAIRS[opening] else 0
            if depth == 0:
                return j
        raise _bad(f"Unclosed {opening!r} in the Protobuf schema")

    def statement_end(self, i: int) -> int:
        """The index of the ';' ending the statement at ``i`` (brackets skipped)."""
        j = i
        while j < len(self.toks):
            v = self.toks[j].value
            if v == ";":
                return j
            j = self.close(j) + 1 if v in ("{", "[") else j + 1
        raise _bad("Unterminated statement in the Protobuf schema")

    def skip_block(self, i: int) -> int:
        j = i
        while j < len(self.toks) and self.value(j) != "{":
            j += 1
        return self.close(j) + 1

    def _scan_file(self) -> None:
        i = 0
        while i < len(self.toks):
            v = self.value(i)
            if v == "message" and self.value(i + 2) == "{":
                child = _Message(self.value(i + 1), i + 2)
                self.root.messages.setdefault(child.name, child)
                i = self._scan_body(i + 3, child, None)
            elif v in _BLOCKS:
                i = self.skip_block(i)
            elif v == ";":
                i += 1
            else:
                j = self.statement_end(i)
                if v in ("syntax", "package", "import"):
                    self.header_end = self.toks[j].end
                    if v == "import" and any(t.kind == "str" and _literal(t.value) ==
                                             _META_IMPORT for t in self.toks[i:j]):
                        self.has_meta_import = True
                i = j + 1

    def _scan_body(self, i: int, msg: _Message, oneof: str | None) -> int:
        while True:
            v = self.value(i)
            if v == "":
                raise _bad(f"Message {msg.name!r} is not closed")
            if v == "}":
                return i + 1
            if v == ";":
                i += 1
            elif v == "message" and self.value(i + 2) == "{":
                child = _Message(self.value(i + 1), i + 2)
                msg.messages.setdefault(child.name, child)
                i = self._scan_body(i + 3, child, None)
            elif v == "oneof" and self.value(i + 2) == "{":
                msg.oneofs.add(self.value(i + 1))
                i = self._scan_body(i + 3, msg, self.value(i + 1))
            elif v in _BLOCKS:
                i = self.skip_block(i)
            else:
                j = self.statement_end(i)
                if v == "option":
                    if oneof is None:
                        msg.options.append((i, j))
                elif v not in ("reserved", "extensions"):
                    self._field(i, j, msg, oneof)
                i = j + 1

    def _field(self, i: int, j: int, msg: _Message, oneof: str | None) -> None:
        k, equals, brackets = i, None, None
        while k < j:
            v = self.value(k)
            if v == "=" and equals is None:
                equals = k
            if v == "[" and equals is not None:
                brackets = (k, self.close(k))
                break
            k = self.close(k) + 1 if v in ("{", "[") else k + 1
        if equals is not None and equals > i:
            msg.fields.append(_Field(self.value(equals - 1), oneof, j, brackets))

    # --- meta options -------------------------------------------------------------------

    def field_options(self, f: _Field) -> list[tuple[str, int, int, int]]:
        """``(name, first, equals, last)`` token indexes of each option in a field's
        brackets."""
        out: list[tuple[str, int, int, int]] = []
        if f.brackets is None:
            return out
        lb, rb = f.brackets
        k = lb + 1
        while k < rb:
            end = k
            while end < rb and self.value(end) != ",":
                end = self.close(end) + 1 if self.value(end) in ("{", "[", "(") else end + 1
            name, equals = self.option_name(k, end)
            out.append((name, k, equals, end - 1))
            k = end + 1
        return out

    def option_name(self, i: int, j: int) -> tuple[str, int]:
        """The normalized option name starting at token ``i`` and the index of its '='."""
        k = i
        while k < j and self.value(k) != "=":
            k += 1
        name = "".join(self.toks[n].value for n in range(i, k)).replace("(.", "(")
        return name, k

    def read_meta(self, meta: _Meta, name: str, start: int, end: int, base: str) -> None:
        """Add to ``meta`` the option ``name`` (``base`` or ``base.sub``) whose value is
        tokens ``start`` .. ``end`` inclusive."""
        if name != base:
            sub = name[len(base) + 1:]
            if sub == "tags":
                meta.tags = merged_tags(meta.tags, self._strings(start, end), ())
            else:
                meta.others.append(f"{sub}: {self.span(start, end)}")
            return
        if self.value(start) != "{":
            raise _bad(f"Option {base} must have a message value")
        k = start + 1
        while k < end:
            if self.value(k) in (",", ";"):
                k += 1
                continue
            key_start = k
            key = self.value(k)
            k = self.close(k) + 1 if key == "[" else k + 1
            if self.value(k) == ":":
                k += 1
            v = self.value(k)
            last = self.close(k) if v in ("{", "[", "<") else k + 1 if v == "-" else k
            while self.toks[last].kind == "str" and self.value(last + 1).startswith(("'", '"')):
                last += 1  # adjacent string literals
            if key == "tags":
                meta.tags = merged_tags(meta.tags, self._strings(k, last), ())
            else:
                meta.others.append(self.span(key_start, last))
            k = last + 1

    def _strings(self, i: int, j: int) -> list[str]:
        return [_literal(t.value) for t in self.toks[i:j + 1] if t.kind == "str"]


def _field_of(src: _Source, ids: list[str], path: str) -> _Field:
    def message(names: list[str]) -> _Message | None:
        m: _Message | None = src.root
        for n in names:
            m = m.messages.get(n) if m is not None else None
        return m

    *scope, name = ids
    owner, oneof = (message(scope), None) if scope else (None, None)
    if owner is None and len(scope) > 1:
        owner, oneof = message(scope[:-1]), scope[-1]
        if owner is not None and oneof not in owner.oneofs:
            owner = None
    for f in owner.fields if owner is not None else ():
        if f.name == name and (oneof is None or f.oneof == oneof):
            return f
    raise _bad(f"No field {path!r} in the schema to tag")


def _field_edit(src: _Source, f: _Field, meta_text: str | None) -> tuple[int, int, str]:
    entries: list[str] = []
    placed = False
    for name, first, _, last in src.field_options(f):
        if name.startswith(_FIELD_META):
            if not placed and meta_text is not None:
                entries.append(f"{_FIELD_META} = {meta_text}")
            placed = True
        else:
            entries.append(src.span(first, last))
    if not placed and meta_text is not None:
        entries.append(f"{_FIELD_META} = {meta_text}")
    new = f" [{', '.join(entries)}]" if entries else ""
    if f.brackets is not None:
        lb, rb = f.brackets
        return src.toks[lb - 1].end, src.toks[rb].end, new
    at = src.toks[f.semicolon - 1].end
    return at, at, new


def _message_edits(src: _Source, m: _Message, meta_text: str | None) -> list[tuple[int, int, str]]:
    edits: list[tuple[int, int, str]] = []
    new = f"option {_MESSAGE_META} = {meta_text};" if meta_text is not None else ""
    for i, j in m.options:
        if src.option_name(i + 1, j)[0].startswith(_MESSAGE_META):
            start, end = src.toks[i].start, src.toks[j].end
            line = src.text.rfind("\n", 0, start) + 1
            if not new and not src.text[line:start].strip() and src.text[end:end + 1] == "\n":
                start, end = line, end + 1  # the statement's whole line goes
            edits.append((start, end, new))
            new = ""
    if new:
        at = src.toks[m.open].end
        head = src.text[src.text.rfind("\n", 0, src.toks[m.open].start) + 1:]
        indent = head[:len(head) - len(head.lstrip(" \t"))]
        edits.append((at, at, f"\n{indent}  {new}"))
    return edits


def retag_proto(text: str, add: dict[tuple[str, str], list[str]],
                remove: dict[tuple[str, str], list[str]]) -> str:
    """Protobuf schema ``text`` (``.proto`` source) with the tags of ``add`` added and those
    of ``remove`` removed (keys are ``(entityType, entityPath)``; see the module docs).

    Raises:
        InvalidSchemaError: a message or field the schema does not have, or a meta option
            that is not a message value (42201).
    """
    src = _Source(text)
    touched: dict[int, tuple[_Field | _Message, _Meta]] = {}
    for key in retag_order(add, remove):
        kind, path = key
        ids = path.split(".")
        element: _Field | _Message
        if kind == "SR_RECORD":
            found: _Message | None = src.root
            for n in ids:
                found = found.messages.get(n) if found is not None else None
            if found is None:
                raise _bad(f"No message {path!r} in the schema to tag")
            element = found
        else:
            element = _field_of(src, ids, path)
        if id(element) not in touched:
            touched[id(element)] = (element, _read(src, element))
        meta = touched[id(element)][1]
        meta.tags = merged_tags(meta.tags, add.get(key), remove.get(key))
    edits: list[tuple[int, int, str]] = []
    wrote_meta = False
    for element, meta in touched.values():
        meta_text = meta.text()
        wrote_meta = wrote_meta or meta_text is not None
        if isinstance(element, _Field):
            edits.append(_field_edit(src, element, meta_text))
        else:
            edits.extend(_message_edits(src, element, meta_text))
    if wrote_meta and not src.has_meta_import:
        prefix = "\n" if src.header_end else ""
        edits.append((src.header_end, src.header_end,
                      f'{prefix}import "{_META_IMPORT}";{"" if prefix else chr(10)}'))
    out = text
    for start, end, new in sorted(edits, key=lambda e: (e[0], e[1]), reverse=True):
        out = out[:start] + new + out[end:]
    return out


def _read(src: _Source, element: _Field | _Message) -> _Meta:
    """The current meta option of a field or message."""
    meta = _Meta([], [])
    if isinstance(element, _Field):
        if element.brackets is None:
            return meta
        for name, _, equals, last in src.field_options(element):
            if name.startswith(_FIELD_META):
                src.read_meta(meta, name, equals + 1, last, _FIELD_META)
        return meta
    for i, j in element.options:
        name, equals = src.option_name(i + 1, j)
        if name.startswith(_MESSAGE_META):
            src.read_meta(meta, name, equals + 1, j - 1, _MESSAGE_META)
    return meta
