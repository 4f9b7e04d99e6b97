"""Every name a package loads lazily (a module ``__getattr__``) is declared for type checkers
(an ``if TYPE_CHECKING:`` import of it from the module that defines it), and the lazy
``__getattr__`` is hidden from them, so a misspelled import is a type error (mypy's part is
in test_typing.py; this keeps the declarations and the lazy table the same)."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import kontrakt

PACKAGE = Path(kontrakt.__file__).parent


def _type_checking_imports(tree: ast.Module) -> dict[str, str]:
    """name -> module, for ``from module import name`` under ``if TYPE_CHECKING:``."""
    out: dict[str, str] = {}
    for node in tree.body:
        if (isinstance(node, ast.If) and isinstance(node.test, ast.Name)
                and node.test.id == "TYPE_CHECKING"):
            for item in node.body:
                if isinstance(item, ast.ImportFrom) and item.module:
                    out.update({a.asname or a.name: item.module for a in item.names})
    return out


def _lazy_getattr_visible_to_checkers(tree: ast.Module) -> bool:
    return any(isinstance(n, ast.FunctionDef) and n.name == "__getattr__" for n in tree.body)


def test_lazily_exported_names_are_declared_for_type_checkers() -> None:
    packages = [p for p in PACKAGE.rglob("__init__.py") if "def __getattr__" in p.read_text()]
    assert PACKAGE / "serde" / "__init__.py" in packages
    for path in packages:
        tree = ast.parse(path.read_text())
        name = ".".join(path.parent.relative_to(PACKAGE.parent).parts)
        module = importlib.import_module(name)
        lazy: dict[str, str] = module._LAZY
        declared = _type_checking_imports(tree)
        assert set(declared) == set(lazy), name
        for attr, sub in lazy.items():
            assert declared[attr] == f"{name}.{sub}", attr
            assert attr in module.__all__
        assert not _lazy_getattr_visible_to_checkers(tree), (
            f"{name}: a module-level __getattr__ makes misspelled imports type-check")
