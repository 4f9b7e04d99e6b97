"""docs/security.md names only options that exist, and its client configurations are accepted
(examples with placeholders are built, not connected)."""

from __future__ import annotations

import re
from pathlib import Path

from kontrakt._config import COMMON_OPTIONS, SECURITY_OPTIONS
from kontrakt.clients import AsyncKafkaClient
from kontrakt.registry._config import _KEYS as REGISTRY_KEYS

DOC = Path(__file__).resolve().parents[2] / "docs" / "security.md"


def test_every_option_named_exists() -> None:
    text = DOC.read_text()
    named = set(re.findall(r"`((?:sasl|ssl|security|enable\.sasl|bearer\.auth)[a-z.]*)[`=]",
                           text))
    named |= set(re.findall(r'"((?:sasl|ssl|security|bootstrap)\.[a-z.]+)"', text))
    named.discard("sasl.kerberos.*")
    assert len(named) > 15
    known = set(SECURITY_OPTIONS) | set(COMMON_OPTIONS) | set(REGISTRY_KEYS)
    assert sorted(named - known) == []


def test_client_examples_are_valid_configurations() -> None:
    blocks = re.findall(r"```python\n(\{.*?\})\n```", DOC.read_text(), re.S)
    assert len(blocks) == 5
    for block in blocks:
        conf = eval(block, {})  # the examples are dict literals of strings
        assert isinstance(conf.pop("ssl.ca.location", ""), str)  # a file only the user has
        AsyncKafkaClient(conf)  # validates every option and builds the SASL/TLS setup
