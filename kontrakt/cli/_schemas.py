"""Schema contract checks: the schemas in a folder against git history or a Schema Registry.

A folder holds one file per subject: ``<subject>.avsc`` (Avro), ``<subject>.json`` (JSON
Schema) or ``<subject>.proto`` (Protobuf); the subject is the file name without its extension
(``schemas/orders-value.avsc`` -> ``orders-value``). Protobuf imports and JSON Schema ``$ref``
URLs that name another file of the folder (by path relative to the folder) become schema
references, resolved from the same source (working tree, git revision or registry).
"""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

from kontrakt.cli._common import EXTENSIONS
from kontrakt.errors import KontraktError
from kontrakt.registry.compatibility import (
    CompatibilityLevel,
    CompatibilityResult,
    JsonSchemaPolicy,
    check_compatibility,
)

__all__ = [
    "EXTENSIONS",
    "FileReport",
    "LocalReference",
    "LocalSchema",
    "SchemaSourceError",
    "check_against_git",
    "check_against_registry",
    "load_folder",
    "schema_type_for",
]

_IMPORT_RE = re.compile(r'^\s*import\s+(?:public\s+|weak\s+)?"([^"]+)"\s*;', re.MULTILINE)
_GIT_TIMEOUT_S = 60.0
_HTTP_TIMEOUT_S = 30.0


class SchemaSourceError(KontraktError):
    """Previous schemas could not be read (not a git repository, unknown revision, registry
    unreachable or answering with an error)."""

    def __init__(self, message: str) -> None:
        super().__init__(message)


@dataclass(frozen=True, slots=True)
class LocalReference:
    """A reference from one folder schema to another (``name`` is the import path / $ref)."""

    name: str
    subject: str
    version: int | None = None


@dataclass(frozen=True, slots=True)
class LocalSchema:
    """A schema read from a file (or a git revision of it, or a registry version)."""

    schema_str: str
    schema_type: str
    references: list[LocalReference] = field(default_factory=list)
    version: int | None = None


@dataclass(frozen=True, slots=True)
class FileReport:
    """The outcome for one schema file.

    Attributes:
        path: the file, relative to the folder.
        subject: the subject it stands for.
        previous: how many previous versions it was compared with (0: a new subject).
        level: the level applied.
        result: the verdict, or None when an error prevented checking.
        error: the error text when checking failed (bad schema, unreadable source).
    """

    path: str
    subject: str
    previous: int
    level: str
    result: CompatibilityResult | None
    error: str = ""

    @property
    def ok(self) -> bool:
        """True when the file may be released: checked and compatible."""
        return self.result is not None and self.result.is_compatible


def schema_type_for(path: Path) -> str | None:
    """The schema type a file extension stands for, or None for other files."""
    return EXTENSIONS.get(path.suffix.lower())


def _references(text: str, schema_type: str, rel: str, known: set[str]) -> list[LocalReference]:
    names: list[str] = []
    if schema_type == "PROTOBUF":
        names = _IMPORT_RE.findall(text)
    elif schema_type == "JSON":
        names = [r.split("#", 1)[0] for r in re.findall(r'"\$ref"\s*:\s*"([^"]+)"', text)]
    base = str(Path(rel).parent)
    refs = []
    for name in dict.fromkeys(names):
        if not name:
            continue
        candidate = name if name in known else str(Path(base) / name) if base != "." else name
        if candidate in known:
            refs.append(LocalReference(name=name, subject=_subject(candidate)))
    return refs


def _subject(rel: str) -> str:
    return Path(rel).stem


def load_folder(folder: Path) -> dict[str, LocalSchema]:
    """Read every schema file under ``folder`` (recursively), keyed by relative path.

    Raises:
        SchemaSourceError: the folder does not exist; two files map to one subject.
    """
    if not folder.is_dir():
        raise SchemaSourceError(f"schema folder {str(folder)!r} does not exist")
    files = sorted(p for p in folder.rglob("*") if p.is_file() and schema_type_for(p))
    rels = {p.relative_to(folder).as_posix(): p for p in files}
    subjects: dict[str, str] = {}
    for rel in rels:
        other = subjects.setdefault(_subject(rel), rel)
        if other != rel:
            raise SchemaSourceError(f"{other!r} and {rel!r} both stand for subject "
                                    f"{_subject(rel)!r}")
    out = {}
    for rel, path in rels.items():
        stype = schema_type_for(path)
        assert stype is not None
        text = path.read_text(encoding="utf-8")
        out[rel] = LocalSchema(text, stype, _references(text, stype, rel, set(rels)))
    return out


def _lookup_in(schemas: dict[str, LocalSchema], owner: str) -> Callable[[Any], LocalSchema]:
    by_subject = {_subject(rel): s for rel, s in schemas.items()}

    def lookup(ref: Any) -> LocalSchema:
        found = by_subject.get(ref.subject)
        if found is None:
            raise SchemaSourceError(f"{owner}: reference {ref.name!r} names no schema file")
        return found

    return lookup


def _check(rel: str, current: LocalSchema, previous: Sequence[LocalSchema], level: str,
           policy: str, lookup_new: Callable[[Any], Any],
           lookup_old: Callable[[Any], Any]) -> FileReport:
    subject = _subject(rel)
    try:
        # Each side resolves its references from its own source (working tree vs. history).
        def lookup(ref: Any) -> Any:
            return lookup_old(ref) if ref.version is not None else lookup_new(ref)

        result = check_compatibility(current, previous, level, lookup=lookup, policy=policy)
    except KontraktError as exc:
        return FileReport(rel, subject, len(previous), level, None, f"{type(exc).__name__}: {exc}")
    return FileReport(rel, subject, len(previous), level, result)


def _git(repo: Path, *args: str) -> tuple[int, str]:
    try:
        proc = subprocess.run(
            ["git", *args], cwd=repo, capture_output=True, text=True, timeout=_GIT_TIMEOUT_S,
            check=False,
        )
    except FileNotFoundError as exc:
        if not repo.is_dir():
            raise SchemaSourceError(f"schema folder {str(repo)!r} does not exist") from exc
        raise SchemaSourceError("git is not installed (or not on PATH): install it, or "
                                "compare with a registry with --registry URL") from exc
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise SchemaSourceError(f"running git failed: {exc}") from exc
    return proc.returncode, proc.stdout if proc.returncode == 0 else proc.stderr


def check_against_git(
    folder: Path,
    revision: str = "HEAD",
    level: CompatibilityLevel | str = "BACKWARD",
    policy: JsonSchemaPolicy | str = "strict",
    *,
    max_history: int = 100,
) -> list[FileReport]:
    """Compare each schema file with its versions in git.

    Non-transitive levels compare with the file as of ``revision``; transitive levels with
    every committed version of the file up to ``revision`` (oldest first, at most
    ``max_history``). A file that does not exist at ``revision`` is a new subject: compatible.

    Raises:
        SchemaSourceError: not a git work tree, or the revision is unknown.
        InvalidCompatibilityLevelError: bad level or policy.
    """
    lvl = CompatibilityLevel.parse(level)
    JsonSchemaPolicy.parse(policy)
    if not folder.is_dir():  # before git runs in it, which would blame git
        raise SchemaSourceError(f"schema folder {str(folder)!r} does not exist")
    code, top = _git(folder, "rev-parse", "--show-toplevel")
    if code != 0:
        raise SchemaSourceError(f"{str(folder)!r} is not inside a git work tree: {top.strip()}")
    root = Path(top.strip())
    code, _ = _git(root, "rev-parse", "--verify", "--quiet", f"{revision}^{{commit}}")
    if code != 0:
        raise SchemaSourceError(f"unknown git revision {revision!r}")
    prefix = folder.resolve().relative_to(root.resolve()).as_posix()
    current = load_folder(folder)

    def at(commit: str, rel: str) -> LocalSchema | None:
        path = f"{prefix}/{rel}" if prefix != "." else rel
        code, text = _git(root, "show", f"{commit}:{path}")
        if code != 0:
            return None
        stype = EXTENSIONS[Path(rel).suffix.lower()]
        return LocalSchema(text, stype, _references(text, stype, rel, set(current)))

    reports = []
    for rel, schema in current.items():
        path = f"{prefix}/{rel}" if prefix != "." else rel
        if lvl.transitive:
            code, log = _git(root, "log", f"--max-count={max_history}", "--format=%H",
                             revision, "--", path)
            commits = list(reversed(log.split())) if code == 0 else []
        else:
            commits = [revision]
        previous: list[LocalSchema] = []
        for commit in commits:
            old = at(commit, rel)
            if old is not None and (not previous or previous[-1].schema_str != old.schema_str):
                previous.append(LocalSchema(old.schema_str, old.schema_type,
                                            [LocalReference(r.name, r.subject, 0)
                                             for r in old.references],
                                            len(previous) + 1))
        newest = commits[-1] if commits else revision

        def lookup_old(ref: Any, newest: str = newest, owner: str = rel) -> LocalSchema:
            for other in current:
                if _subject(other) == ref.subject:
                    found = at(newest, other)
                    if found is not None:
                        return found
            raise SchemaSourceError(f"{owner}: reference {ref.name!r} not found at {newest}")

        reports.append(_check(rel, schema, previous, lvl.value, str(policy),
                              _lookup_in(current, rel), lookup_old))
    return reports


def check_against_registry(
    folder: Path,
    url: str,
    level: CompatibilityLevel | str | None = None,
    policy: JsonSchemaPolicy | str = "strict",
    *,
    headers: dict[str, str] | None = None,
    timeout: float = _HTTP_TIMEOUT_S,
) -> list[FileReport]:
    """Compare each schema file with the versions of its subject in a Schema Registry.

    The level is the subject's configured level (``GET /config/{subject}?defaultToGlobal=true``)
    unless ``level`` is given. A subject the registry does not know is new: compatible.

    Args:
        folder: the schema folder.
        url: base URL of the registry (``http://127.0.0.1:8081``).
        level: override the registry's level.
        policy: JSON Schema policy.
        headers: extra HTTP headers (e.g. authorization).
        timeout: seconds per HTTP request.

    Raises:
        SchemaSourceError: the registry is unreachable or answers with an unexpected error.
    """
    import httpx

    current = load_folder(folder)
    base = url.rstrip("/")
    with httpx.Client(base_url=base, headers=headers, timeout=timeout) as http:

        def get(path: str) -> Any | None:
            try:
                resp = http.get(path, headers={"Accept": "application/vnd.schemaregistry.v1+json"})
            except httpx.HTTPError as exc:
                raise SchemaSourceError(f"registry {base} unreachable: {exc}") from exc
            if resp.status_code == 404:
                return None
            if resp.status_code >= 400:
                raise SchemaSourceError(f"registry {base} answered {resp.status_code} for "
                                        f"{path}: {resp.text[:200]}")
            return resp.json()

        def version(subject: str, number: int | None) -> LocalSchema:
            body = get(f"/subjects/{quote(subject, safe='')}/versions/{number}")
            if body is None:
                raise SchemaSourceError(f"registry has no version {number} of {subject!r}")
            refs = [LocalReference(r["name"], r["subject"], r["version"])
                    for r in body.get("references") or []]
            return LocalSchema(body["schema"], body.get("schemaType") or "AVRO", refs,
                               body.get("version"))

        reports = []
        for rel, schema in current.items():
            subject = _subject(rel)
            numbers = get(f"/subjects/{quote(subject, safe='')}/versions") or []
            if level is None:
                cfg = get(f"/config/{quote(subject, safe='')}?defaultToGlobal=true") or {}
                lvl = cfg.get("compatibilityLevel") or cfg.get("compatibility") or "BACKWARD"
            else:
                lvl = CompatibilityLevel.parse(level).value
            previous = [version(subject, n) for n in sorted(numbers)]

            def lookup_old(ref: Any) -> LocalSchema:
                return version(ref.subject, ref.version)

            reports.append(_check(rel, schema, previous, lvl, str(policy),
                                  _lookup_in(current, rel), lookup_old))
    return reports


def format_report(reports: Sequence[FileReport]) -> str:
    """Human-readable lines for a list of reports (one line per file, reasons indented)."""
    lines = []
    for r in reports:
        against = f"{r.previous} previous version(s)" if r.previous else "no previous version"
        if r.error:
            lines.append(f"ERROR {r.path} (subject {r.subject}): {r.error}")
        elif r.ok:
            lines.append(f"OK    {r.path} (subject {r.subject}) vs {against} [{r.level}]")
        else:
            assert r.result is not None
            lines.append(f"FAIL  {r.path} (subject {r.subject}) vs {against} [{r.level}]")
            lines.extend(f"      {m}" for m in r.result.messages)
    return "\n".join(lines)


def reports_json(reports: Sequence[FileReport]) -> str:
    """The reports as a JSON document (for CI tooling)."""
    return json.dumps([
        {"path": r.path, "subject": r.subject, "level": r.level, "previous": r.previous,
         "compatible": r.ok, "error": r.error or None,
         "messages": list(r.result.messages) if r.result is not None else []}
        for r in reports
    ], indent=2)
