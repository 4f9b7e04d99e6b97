"""The pytest example in :class:`kontrakt.testing.Cluster`'s docstring runs as written."""

from __future__ import annotations

import textwrap
from typing import Any

from kontrakt.testing import Cluster


def test_the_docstring_example_passes() -> None:
    doc = Cluster.__doc__ or ""
    block = doc.split("Example (pytest)::", 1)[1].split("\n    Args:", 1)[0]
    source = textwrap.dedent(block).strip() + "\n"
    namespace: dict[str, Any] = {}
    exec(compile(source, "<Cluster docstring>", "exec"), namespace)
    # Run the example's fixture and test the way pytest would: set up, test, tear down.
    fixture = namespace["cluster"].__wrapped__
    gen = fixture()
    cluster = next(gen)
    try:
        namespace["test_round_trip"](cluster)
    finally:
        for _ in gen:
            pass
    assert cluster.closed
