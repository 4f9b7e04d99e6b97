"""Every name a package loads lazily (through a module ``__getattr__``) is declared for type
checkers (an ``if TYPE_CHECKING:`` import of it from the module that defines it), and the
lazy ``__getattr__`` is hidden from them, so that a misspelled import is a type error
(mypy's side is in test_typing.py and mistakes.py).

Read from each package's source (names it binds at import time versus its ``__all__``), so it
holds for any package that turns lazy, whatever its lazy table is called.
"""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import kontrakt

PACKAGE = Path(kontrakt.__file__).parent


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _type_checking_imports(tree: ast.Module) -> dict[str, str]:
    """name -> module, for ``from module import name`` under ``if TYPE_CHECKING:``."""
    out: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            for item in node.body:
                if isinstance(item, ast.ImportFrom) and item.module:
                    out.update({a.asname or a.name: item.module for a in item.names})
    return out


def _bound_at_import(tree: ast.Module) -> set[str]:
    """Names the module binds when imported (type-checking-only blocks aside)."""
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names.update(t.id for t in targets if isinstance(t, ast.Name))
    return names


def _getattr_visible_to_checkers(tree: ast.Module) -> bool:
    return any(isinstance(n, ast.FunctionDef) and n.name == "__getattr__" for n in tree.body)


def _lazy_packages() -> list[Path]:
    return [p for p in PACKAGE.rglob("__init__.py") if "def __getattr__" in p.read_text()]


def test_lazily_exported_names_are_declared_for_type_checkers() -> None:
    packages = _lazy_packages()
    assert PACKAGE / "serde" / "__init__.py" in packages
    for path in packages:
        tree = ast.parse(path.read_text())
        name = ".".join(path.parent.relative_to(PACKAGE.parent).parts)
        module = importlib.import_module(name)
        declared = _type_checking_imports(tree)
        lazy = set(module.__all__) - _bound_at_import(tree)
        assert lazy, f"{name}: a module __getattr__ but no lazily exported name"
        undeclared = lazy - set(declared)
        assert not undeclared, f"{name}: not declared for type checkers: {undeclared}"
        for attr in lazy:
            defining = importlib.import_module(declared[attr])
            assert getattr(module, attr) is getattr(defining, attr), attr


def test_no_lazy_getattr_is_visible_to_type_checkers() -> None:
    """A module-level __getattr__ that a checker sees types every unknown name as Any:
    ``from kontrakt.serde import AvroSerializr`` would pass."""
    visible = [p for p in _lazy_packages()
               if _getattr_visible_to_checkers(ast.parse(p.read_text()))]
    assert not visible, f"wrap their __getattr__ in 'if not TYPE_CHECKING:': {visible}"
