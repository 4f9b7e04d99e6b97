"""Which extra provides which optional package, for errors that say what to install."""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import NoReturn

from kontrakt.errors import MissingExtraError

__all__ = ["import_extra", "missing_extra", "raise_missing_extra"]

#: Top-level module -> the extra that installs it (see pyproject.toml).
_EXTRA_OF = {
    "fastavro": "avro",
    "google": "protobuf",
    "jsonschema": "json",
    "referencing": "json",
    "celpy": "rules",
    "jsonata": "rules",
    "cryptography": "encryption",
    "pyspark": "spark",
    "pyarrow": "spark",
}


def missing_extra(exc: ModuleNotFoundError, what: str) -> MissingExtraError | None:
    """The error to raise instead of ``exc`` when it is about an extra's package.

    Args:
        exc: the failed import.
        what: the feature that needed it, e.g. ``"AvroSerializer"``.

    Returns:
        A :class:`MissingExtraError` naming the package and the ``pip install`` command,
        or None when the missing module belongs to no extra (then ``exc`` stands).
    """
    if isinstance(exc, MissingExtraError) or not exc.name:
        return None
    extra = _EXTRA_OF.get(exc.name.partition(".")[0])
    if extra is None:
        return None
    return MissingExtraError(f"{what} needs the {exc.name!r} module, which is not installed: "
                             f"pip install 'kontrakt[{extra}]'", name=exc.name, extra=extra)


def raise_missing_extra(exc: ModuleNotFoundError, what: str) -> NoReturn:
    """Raise :func:`missing_extra`'s error for ``exc`` (chained to it), or ``exc`` itself.

    Use in ``except ModuleNotFoundError as exc:`` around an import of an extra's package.
    """
    better = missing_extra(exc, what)
    if better is None:
        raise exc
    raise better from exc


def import_extra(module: str, what: str) -> ModuleType:
    """Import ``module`` (an extra's package), raising :func:`missing_extra`'s error if absent.

    For checks made early, before the code that uses the package runs (e.g. where an option
    picks a format whose codec lives in an extra).

    Raises:
        MissingExtraError: the module, or one it imports, belongs to a missing extra.
    """
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as exc:
        raise_missing_extra(exc, what)
