"""kontrakt/protocol/messages/__init__.pyi (the typed view of the generated message classes)
is what kontrakt/protocol/_stubgen.py renders from the declarations, and every class, nested
class and field it declares exists at run time as declared."""

from __future__ import annotations

import ast
from typing import Any

import kontrakt.protocol.messages as messages
from kontrakt.protocol import _stubgen
from kontrakt.protocol.spec import ArrayType, Request, Response, Struct, StructType, registry


def test_checked_in_stub_is_what_the_declarations_render() -> None:
    rendered = _stubgen.render()
    assert _stubgen.STUB_PATH.read_text() == rendered, (
        "the message stub is stale: run python -m kontrakt.protocol._stubgen")
    assert _stubgen.main(["--check"]) == 0


def _check_class(node: ast.ClassDef, runtime: Any, path: str,
                 module_level: dict[str, Any]) -> int:
    """Compare one stub class with its run-time class; returns the classes checked."""
    assert isinstance(runtime, type) and issubclass(runtime, Struct), path
    fields = {f.name for f in runtime.FIELDS}
    declared: set[str] = set()
    checked = 1
    for item in node.body:
        if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
            declared.add(item.target.id)
        elif isinstance(item, ast.ClassDef):
            checked += _check_class(item, getattr(runtime, item.name), f"{path}.{item.name}",
                                    module_level)
        elif isinstance(item, ast.Assign):
            # A shared struct: the holder's attribute is the one run-time class.
            (target,) = item.targets
            assert isinstance(target, ast.Name) and isinstance(item.value, ast.Name)
            assert getattr(runtime, target.id) is module_level[item.value.id], (
                f"{path}.{target.id}")
    assert declared == fields, path
    return checked


def test_every_stub_class_matches_its_runtime_class() -> None:
    tree = ast.parse(_stubgen.STUB_PATH.read_text())
    classes = [n for n in tree.body if isinstance(n, ast.ClassDef)]
    # Shared structs are module-level private classes in the stub; find their run-time
    # class through a holder that aliases them.
    shared: dict[str, Any] = {}
    for top in classes:
        if top.name.startswith("_"):
            continue
        stack: list[tuple[ast.ClassDef, Any]] = [(top, getattr(messages, top.name))]
        while stack:
            node, rt = stack.pop()
            for item in node.body:
                if isinstance(item, ast.ClassDef):
                    stack.append((item, getattr(rt, item.name)))
                elif isinstance(item, ast.Assign) and isinstance(item.value, ast.Name):
                    target = item.targets[0]
                    assert isinstance(target, ast.Name)
                    shared.setdefault(item.value.id, getattr(rt, target.id))
    checked = 0
    for node in classes:
        runtime = shared[node.name] if node.name.startswith("_") else getattr(messages, node.name)
        if not node.name.startswith("_"):
            base = Request if node.name.endswith("Request") else Response
            assert issubclass(runtime, base), node.name
        checked += _check_class(node, runtime, node.name, shared)
    public = [n.name for n in classes if not n.name.startswith("_")]
    assert sorted(public) == sorted(messages.__all__)
    assert checked == len(_declared_structs())


def _declared_structs() -> set[int]:
    """Every struct declaration (by identity: one run-time class each)."""
    seen: set[int] = set()
    todo: list[StructType] = [st for spec in registry().values()
                              for st in (spec.request, spec.response)]
    while todo:
        st = todo.pop()
        if id(st) in seen:
            continue
        seen.add(id(st))
        for f in st.fields:
            t = f.type
            while isinstance(t, ArrayType):
                t = t.item
            if isinstance(t, StructType):
                todo.append(t)
    return seen
