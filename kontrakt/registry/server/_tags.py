"""``POST /subjects/{subject}/versions/{version}/tags``: add and remove inline tags of a
schema version's records and fields, registering the result as a new version, as
Confluent's server does.

The request (Confluent's ``TagSchemaRequest``)::

    {"newVersion": 3,
     "tagsToAdd": [{"entity": {"entityPath": "com.acme.Person.ssn", "entityType": "SR_FIELD"},
                    "tags": ["PII"]}],
     "tagsToRemove": [...],
     "metadata": {...}, "ruleSet": {...}, "rulesToMerge": {...}, "rulesToRemove": ["name"]}

An ``SR_RECORD`` entity is a record by full name, an ``SR_FIELD`` entity a field of one
(``Record.full.name.field``); a leading ``.`` is ignored. Tags go to ``confluent:tags``,
existing ones first, in order; a field or record left without tags loses the key. The new
version takes the request's ``metadata`` (else the version's), and its ``ruleSet``, or with
``rulesToMerge`` / ``rulesToRemove`` the previous version's rule set merged and pruned.
``newVersion``, when given, must be the subject's next version. The new version is
registered like any other (compatibility checked, config defaults and overrides applied).

Avro schemas are rewritten here; JSON Schema ones by :mod:`._tags_json` (the
``confluent:tags`` keyword at a path of type words, ``object.address.object.street``) and
Protobuf ones by :mod:`._tags_proto` (``(confluent.field_meta)`` /
``(confluent.message_meta)`` options at ``Message.Nested.field``).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from kontrakt.errors import SchemaRegistryError
from kontrakt.registry._errors import InvalidSchemaError
from kontrakt.registry.server._contracts import merge_rule_sets
from kontrakt.registry.server._tags_json import retag_document, retag_json
from kontrakt.registry.server._tags_proto import retag_proto

if TYPE_CHECKING:
    from kontrakt.registry.server._state import RegistryState

__all__ = ["tag_schema"]

_ENTITY_TYPES = ("SR_RECORD", "SR_FIELD")
_RULE_KINDS = ("migrationRules", "domainRules", "encodingRules")


def _bad(message: str) -> SchemaRegistryError:
    return SchemaRegistryError(422, 422, message)


def _tag_map(raw: Any, member: str) -> dict[tuple[str, str], list[str]]:
    """``[{"entity": {...}, "tags": [...]}]`` as ``{(type, path): tags}``, entries naming
    the same entity merged (a leading ``.`` in the path does not make another entity)."""
    if raw is None:
        return {}
    if not isinstance(raw, list):
        raise _bad(f"{member} must be a list")
    out: dict[tuple[str, str], list[str]] = {}
    for item in raw:
        entity = item.get("entity") if isinstance(item, dict) else None
        tags = item.get("tags") if isinstance(item, dict) else None
        if not isinstance(entity, dict) or not isinstance(tags, list) or not all(
                isinstance(t, str) and t for t in tags):
            raise _bad(f"{member}: each entry needs an entity and a list of tags")
        kind, path = entity.get("entityType"), entity.get("entityPath")
        if kind not in _ENTITY_TYPES:
            raise _bad(f"{member}: entityType must be one of {', '.join(_ENTITY_TYPES)}")
        if not isinstance(path, str) or not path.lstrip("."):
            raise _bad(f"{member}: entityPath must be a non-empty string")
        found = out.setdefault((kind, path.lstrip(".")), [])
        found.extend(t for t in tags if t not in found)
    return out


def _records(schema: Any, namespace: str, out: dict[str, dict[str, Any]]) -> None:
    """Every record of an Avro schema by full name (nested ones included)."""
    if isinstance(schema, list):
        for branch in schema:
            _records(branch, namespace, out)
        return
    if not isinstance(schema, dict):
        return
    kind = schema.get("type")
    if kind == "record" or kind == "error":
        name = str(schema.get("name", ""))
        ns = name.rpartition(".")[0] if "." in name else str(schema.get("namespace", namespace))
        full = name if "." in name or not ns else f"{ns}.{name}"
        out[full] = schema
        for f in schema.get("fields") or ():
            if isinstance(f, dict):
                _records(f.get("type"), ns, out)
    elif kind in ("array", "map"):
        _records(schema.get("items" if kind == "array" else "values"), namespace, out)
    elif isinstance(kind, (dict, list)):
        _records(kind, namespace, out)


def _node(records: dict[str, dict[str, Any]], kind: str, path: str) -> dict[str, Any]:
    if kind == "SR_RECORD":
        record = records.get(path)
        if record is None:
            raise InvalidSchemaError(422, 42201, f"No record {path!r} in the schema to tag")
        return record
    owner, _, name = path.rpartition(".")
    record = records.get(owner)
    for f in (record or {}).get("fields") or ():
        if isinstance(f, dict) and f.get("name") == name:
            return f
    raise InvalidSchemaError(422, 42201, f"No field {path!r} in the schema to tag")


def retag_avro(text: str, add: dict[tuple[str, str], list[str]],
               remove: dict[tuple[str, str], list[str]]) -> str:
    """Avro schema ``text`` with the tags of ``add`` added and those of ``remove`` removed.

    Raises:
        InvalidSchemaError: an entity the schema does not have (42201).
    """
    schema = json.loads(text)
    records: dict[str, dict[str, Any]] = {}
    _records(schema, "", records)
    return retag_document(schema, add, remove, lambda key: _node(records, *key))


def _pruned(rule_set: dict[str, Any] | None, names: list[str]) -> dict[str, Any] | None:
    if rule_set is None:
        return None
    out = {k: v for k, v in rule_set.items() if k not in _RULE_KINDS}
    for kind in _RULE_KINDS:
        kept = [r for r in rule_set.get(kind) or ()
                if not (isinstance(r, dict) and r.get("name") in names)]
        if kept:
            out[kind] = kept
    return out


def tag_schema(state: RegistryState, subject: str, version: int | None,
               body: Any) -> dict[str, Any]:
    """Answer ``POST /subjects/{subject}/versions/{version}/tags`` (see the module docs):
    the new version as ``GET /subjects/{subject}/versions/{version}`` gives it.

    Raises:
        SchemaRegistryError: a malformed request (422), an unknown subject or version
            (404), an entity the schema lacks (42201), a
            ``newVersion`` that is not the next one (42201), or what registering the new
            version raises (an incompatible schema: 40901).
    """
    if not isinstance(body, dict):
        raise _bad("Request body must be a JSON object")
    add = _tag_map(body.get("tagsToAdd"), "tagsToAdd")
    remove = _tag_map(body.get("tagsToRemove"), "tagsToRemove")
    new_version = body.get("newVersion")
    if new_version is not None and (not isinstance(new_version, int)
                                    or isinstance(new_version, bool)):
        raise _bad("newVersion must be an integer")
    for member in ("metadata", "ruleSet", "rulesToMerge"):
        if body.get(member) is not None and not isinstance(body[member], dict):
            raise _bad(f"{member} must be an object")
    to_remove = body.get("rulesToRemove")
    if to_remove is not None and (not isinstance(to_remove, list) or not all(
            isinstance(n, str) for n in to_remove)):
        raise _bad("rulesToRemove must be a list of rule names")
    with state.lock:
        current = state.get_version(subject, version, False)
        previous = None
        if body.get("rulesToMerge") is not None or to_remove is not None:
            # The rules merged into are the version before the new one's (the latest).
            before = new_version - 1 if new_version is not None else None
            previous = state.get_version(subject, before, False).get("ruleSet")
    schema_type = current.get("schemaType") or "AVRO"
    retag = {"AVRO": retag_avro, "JSON": retag_json, "PROTOBUF": retag_proto}.get(schema_type)
    if retag is None:
        raise InvalidSchemaError(422, 42201, f"Tags cannot be modified in {schema_type} schemas")
    text = retag(current["schema"], add, remove) if add or remove else current["schema"]
    rule_set = body.get("ruleSet")
    if previous is not None or body.get("rulesToMerge") is not None or to_remove is not None:
        rule_set = _pruned(merge_rule_sets(previous, body.get("rulesToMerge")),
                           list(to_remove or ()))
    request: dict[str, Any] = {"schema": text, "schemaType": schema_type,
                               "references": current.get("references") or [],
                               "metadata": body.get("metadata") or current.get("metadata")}
    if rule_set is not None:
        request["ruleSet"] = rule_set
    if new_version is not None:
        request["version"] = new_version
    done = state.register(subject, request, False)
    with state.lock:
        return state.get_version(subject, int(done["version"]), False)
