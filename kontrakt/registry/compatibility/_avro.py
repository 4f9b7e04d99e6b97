"""Avro reader/writer compatibility: can data written with one schema be read with another?

The rules are the schema resolution rules of the Avro specification, applied the way the Java
``SchemaCompatibility`` class (which Confluent Schema Registry uses) applies them:

* same primitive kinds match; the promotions int -> long/float/double, long -> float/double,
  float -> double and string <-> bytes are allowed;
* named types (record, enum, fixed) must have the same unqualified name, or the reader must
  list the writer's full name among its aliases;
* a reader record field must exist in the writer (by name, or by one of the reader field's
  aliases) or have a default;
* every writer enum symbol must exist in the reader, unless the reader has an enum default;
* fixed sizes must be equal;
* every branch of a writer union must be readable by the reader; a non-union writer must be
  readable by some branch of a reader union;
* logical types do not take part: resolution works on the underlying type, as in Java;
* recursive types terminate: a (reader, writer) pair being checked is assumed compatible.
"""

from __future__ import annotations

from dataclasses import dataclass

from kontrakt.registry.compatibility._avro_model import AvroNode

__all__ = ["AvroIssue", "check_avro_pair"]

_PROMOTIONS: dict[str, frozenset[str]] = {
    "long": frozenset({"int"}),
    "float": frozenset({"int", "long"}),
    "double": frozenset({"int", "long", "float"}),
    "bytes": frozenset({"string"}),
    "string": frozenset({"bytes"}),
}


@dataclass(frozen=True, slots=True)
class AvroIssue:
    """One incompatibility between a reader and a writer schema."""

    error_type: str
    path: str
    description: str
    additional_info: str


class _Checker:
    def __init__(self, reader_role: str, writer_role: str) -> None:
        self.reader_role = reader_role
        self.writer_role = writer_role
        # (id(reader), id(writer)) -> issues, or None while the pair is being checked.
        self.memo: dict[tuple[int, int], list[AvroIssue] | None] = {}

    def check(self, reader: AvroNode, writer: AvroNode, path: str) -> list[AvroIssue]:
        key = (id(reader), id(writer))
        if key in self.memo:
            done = self.memo[key]
            return [] if done is None else done
        self.memo[key] = None
        result = self._calculate(reader, writer, path)
        self.memo[key] = result
        return result

    def _issue(self, error_type: str, path: str, description: str, info: str) -> AvroIssue:
        return AvroIssue(error_type, path or "/", description, info)

    def _calculate(self, reader: AvroNode, writer: AvroNode, path: str) -> list[AvroIssue]:
        r, w = self.reader_role, self.writer_role
        if reader.kind == writer.kind:
            kind = reader.kind
            if kind == "array":
                assert reader.items is not None and writer.items is not None
                return self.check(reader.items, writer.items, f"{path}/items")
            if kind == "map":
                assert reader.values is not None and writer.values is not None
                return self.check(reader.values, writer.values, f"{path}/values")
            if kind == "fixed":
                issues = self._names(reader, writer, path)
                if reader.size != writer.size:
                    issues.append(self._issue(
                        "FIXED_SIZE_MISMATCH", f"{path}/size",
                        f"The size of the fixed type '{reader.fullname}' at path '{path}/size' "
                        f"is {reader.size} in the {r} schema and {writer.size} in the {w} schema",
                        f"expected: {writer.size}, found: {reader.size}",
                    ))
                return issues
            if kind == "enum":
                issues = self._names(reader, writer, path)
                missing = sorted(set(writer.symbols) - set(reader.symbols))
                if missing and reader.enum_default is None:
                    issues.append(self._issue(
                        "MISSING_ENUM_SYMBOLS", f"{path}/symbols",
                        f"The {r} schema's enum '{reader.fullname}' at path '{path}/symbols' "
                        f"is missing the symbols {missing} that the {w} schema can write, "
                        "and it has no enum default",
                        ", ".join(missing),
                    ))
                return issues
            if kind == "record":
                return self._names(reader, writer, path) + self._fields(reader, writer, path)
            if kind == "union":
                issues = []
                for i, branch in enumerate(writer.branches):
                    if self.check(reader, branch, path):
                        issues.append(self._issue(
                            "MISSING_UNION_BRANCH", f"{path}/{i}",
                            f"The {r} schema's union at path '{path or '/'}' has no branch "
                            f"that can read the {w} schema's union branch {i} "
                            f"({branch.describe()})",
                            f"reader union lacking writer type: {branch.kind.upper()}",
                        ))
                return issues
            return []  # identical primitive kinds
        if writer.kind == "union":
            issues = []
            for branch in writer.branches:
                issues.extend(self.check(reader, branch, path))
            return issues
        if writer.kind in _PROMOTIONS.get(reader.kind, frozenset()):
            return []
        if reader.kind == "union":
            for branch in reader.branches:
                if not self.check(branch, writer, path):
                    return []
            return [self._issue(
                "MISSING_UNION_BRANCH", path,
                f"The {r} schema's union at path '{path or '/'}' has no branch that can read "
                f"the {w} schema's type {writer.describe()}",
                f"reader union lacking writer type: {writer.kind.upper()}",
            )]
        return [self._issue(
            "TYPE_MISMATCH", path,
            f"The type at path '{path or '/'}' is {reader.describe()} in the {r} schema and "
            f"{writer.describe()} in the {w} schema, which it cannot read",
            f"reader type: {reader.kind.upper()} not compatible with writer type: "
            f"{writer.kind.upper()}",
        )]

    def _names(self, reader: AvroNode, writer: AvroNode, path: str) -> list[AvroIssue]:
        # Java compares unqualified names, or the reader's (full) aliases with the writer's
        # full name.
        if reader.name == writer.name or writer.fullname in reader.aliases:
            return []
        return [self._issue(
            "NAME_MISMATCH", f"{path}/name",
            f"The name of the {reader.kind} at path '{path or '/'}' is '{reader.fullname}' in "
            f"the {self.reader_role} schema and '{writer.fullname}' in the {self.writer_role} "
            "schema (an alias is needed to rename a type)",
            f"expected: {writer.fullname}",
        )]

    def _fields(self, reader: AvroNode, writer: AvroNode, path: str) -> list[AvroIssue]:
        by_name = {f.name: f for f in writer.fields}
        issues: list[AvroIssue] = []
        for rf in reader.fields:
            fpath = f"{path}/fields/{rf.index}"
            wf = by_name.get(rf.name)
            if wf is None:
                for alias in rf.aliases:
                    wf = by_name.get(alias)
                    if wf is not None:
                        break
            if wf is None:
                if not rf.has_default:
                    issues.append(self._issue(
                        "READER_FIELD_MISSING_DEFAULT_VALUE", fpath,
                        f"The field '{rf.name}' at path '{fpath}' in the {self.reader_role} "
                        f"schema has no default value and is missing in the "
                        f"{self.writer_role} schema",
                        rf.name,
                    ))
                continue
            issues.extend(self.check(rf.type, wf.type, f"{fpath}/type"))
        return issues


def check_avro_pair(
    reader: AvroNode, writer: AvroNode, *, reader_role: str = "new", writer_role: str = "old"
) -> list[AvroIssue]:
    """Check that ``reader`` can read everything ``writer`` can write.

    Args:
        reader: the parsed reader schema.
        writer: the parsed writer schema.
        reader_role: how messages call the reader schema (``"new"`` for BACKWARD).
        writer_role: how messages call the writer schema.

    Returns:
        The incompatibilities; empty when compatible.
    """
    return _Checker(reader_role, writer_role).check(reader, writer, "")
