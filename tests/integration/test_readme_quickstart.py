"""The README's quickstart runs as written, against a real broker and the embedded registry."""

from __future__ import annotations

import re
import sys
import types
from pathlib import Path

import pytest

from kontrakt.registry.server import RegistryServer
from kontrakt.testing import TansuBroker

pytestmark = pytest.mark.integration

README = Path(__file__).resolve().parents[2] / "README.md"


def test_quickstart_runs(tansu_broker: TansuBroker) -> None:
    text = README.read_text()
    section = text[text.index("## Quickstart"):]
    code = re.search(r"```python\n(.*?)```", section, re.S)
    assert code is not None
    source = (code.group(1)
              .replace("127.0.0.1:9092", tansu_broker.bootstrap_servers)
              .replace('"user-events"', '"readme-user-events"')
              # Tansu holds a JoinGroup for half the session timeout (TEST-BROKERS.md).
              .replace('"group.id": "audit",', '"group.id": "audit", "session.timeout.ms": 1000,'))
    assert "session.timeout.ms" in source
    tansu_broker.create_topic("readme-user-events", 1)
    with RegistryServer() as srv:
        source = source.replace("http://127.0.0.1:8081", srv.url)
        # A real module: dataclasses look their module up in sys.modules.
        module = types.ModuleType("readme_quickstart")
        sys.modules[module.__name__] = module
        try:
            exec(compile(source, "README.md quickstart", "exec"), module.__dict__)
        finally:
            del sys.modules[module.__name__]
        namespace = module.__dict__
        namespace["registry"].close()
    record = namespace["record"]
    assert record is not None
    value = record.value  # type: ignore[attr-defined]
    assert type(value).__name__ == "UserSignedUp"
    assert (value.user_id, value.email, value.referrer) == ("u-1", "ada@example.com", None)
