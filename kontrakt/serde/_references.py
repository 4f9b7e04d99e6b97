"""The registry's schema values, and parsing a registry schema together with the schemas it
references.

:func:`make_schema` and :func:`make_reference` build the registry's ``Schema`` and
``SchemaReference`` (imported late: the registry is optional for the primitive serdes);
:class:`ReferenceParsing` is the mixin every format's cores use to fetch a schema's
references (depth first, once each) and parse the whole once per schema.
"""

from __future__ import annotations

from typing import Any

from kontrakt.serde._registry_io import GetVersion, Steps

__all__ = ["ReferenceParsing", "make_reference", "make_schema"]


def make_schema(schema_str: str, schema_type: str, references: Any = ()) -> Any:
    """Build the registry's ``Schema`` value (imported late: the registry is optional here)."""
    from kontrakt.registry import Schema

    return Schema(schema_str, schema_type, tuple(references or ()))


def make_reference(name: str, subject: str, version: int) -> Any:
    """Build the registry's ``SchemaReference`` value."""
    from kontrakt.registry import SchemaReference

    return SchemaReference(name, subject, version)


class ReferenceParsing:
    """Parses registry schemas together with the schemas they reference, once per schema.

    A format mixes it into its cores and supplies :meth:`build`; the references are fetched
    from the registry (``GetVersion`` in the core's ``fetch_format``), depth first, so
    :meth:`build` receives them dependencies first.
    """

    fetch_format: str | None = None

    def __init__(self) -> None:
        self._parsed: dict[Any, Any] = {}

    def parse_schema(self, schema: Any) -> Steps:
        """The parsed form of ``schema`` (a registry ``Schema``), cached by text + references."""
        refs = tuple(getattr(schema, "references", ()) or ())
        key = (schema.schema_str, tuple((r.name, r.subject, r.version) for r in refs))
        parsed = self._parsed.get(key)
        if parsed is None:
            deps: list[tuple[str, str]] = []
            yield from self._load_refs(refs, set(), deps)
            parsed = self._parsed[key] = self.build(schema.schema_str, deps)
        return parsed

    def _load_refs(self, refs: Any, seen: set[Any], deps: list[tuple[str, str]]) -> Steps:
        for ref in refs:
            once = self.reference_key(ref)
            if once in seen:
                continue
            seen.add(once)
            registered = yield GetVersion(ref.subject, ref.version, self.fetch_format)
            yield from self._load_refs(registered.schema.references or (), seen, deps)
            deps.append((ref.name, registered.schema.schema_str))

    @staticmethod
    def reference_key(ref: Any) -> Any:
        """What makes two references the same fetch (default: subject and version)."""
        return ref.subject, ref.version

    def build(self, schema_str: str, deps: list[tuple[str, str]]) -> Any:
        """Parse ``schema_str`` given its references' ``(name, schema_str)``, dependencies
        first."""
        raise NotImplementedError
