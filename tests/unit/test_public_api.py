"""The curated public surface: what ``import kontrakt`` offers, and nothing by accident."""

from __future__ import annotations

import inspect

import kontrakt
import kontrakt.errors


def test_top_level_all_is_curated() -> None:
    assert sorted(kontrakt.__all__) == sorted(set(kontrakt.__all__))
    for name in kontrakt.__all__:
        assert hasattr(kontrakt, name), name
    public = {n for n in vars(kontrakt) if not n.startswith("_") and n != "annotations"}
    # Subpackages appear as attributes once imported; everything else must be in __all__.
    modules = {n for n in public if inspect.ismodule(getattr(kontrakt, n))}
    assert public - modules <= set(kontrakt.__all__)


def test_every_error_has_a_docstring_and_one_root() -> None:
    for name in kontrakt.errors.__all__:
        cls = getattr(kontrakt.errors, name)
        assert issubclass(cls, kontrakt.KontraktError), name
        assert cls.__doc__ and cls.__doc__.strip(), name


def test_value_types_are_frozen_and_slotted() -> None:
    tp = kontrakt.TopicPartition("t", 1)
    assert not hasattr(tp, "__dict__")
    try:
        tp.partition = 2  # type: ignore[misc]
    except AttributeError:
        pass
    else:  # pragma: no cover
        raise AssertionError("TopicPartition is mutable")
    assert str(tp) == "t-1"
