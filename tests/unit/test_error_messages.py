"""Error messages name what failed: broker error classes offered by ``kontrakt.errors``, and
a PartialFailureError that spells out each failed entity's error."""

from __future__ import annotations

import subprocess
import sys

import pytest

import kontrakt.errors
from kontrakt import AsyncKafkaClient
from kontrakt.errors import ConfigError, InvalidArgumentError, PartialFailureError
from kontrakt.protocol.errors import ERRORS_BY_CODE, TopicAlreadyExistsError
from kontrakt.testing import TansuBroker


def test_every_broker_error_class_is_importable_from_kontrakt_errors() -> None:
    shared = {"CorruptMessageError", "TransactionAbortableError", "UnsupportedVersionError"}
    for cls in ERRORS_BY_CODE.values():
        offered = getattr(kontrakt.errors, cls.__name__)
        assert cls.__name__ in kontrakt.errors.__all__
        if cls.__name__ in shared:
            # The general class: catching it catches the broker's code too.
            assert offered is not cls and issubclass(cls, offered)
        else:
            assert offered is cls
    assert kontrakt.errors.TopicAlreadyExistsError is TopicAlreadyExistsError


def test_partial_failure_message_names_each_entity_and_its_error() -> None:
    exists = TopicAlreadyExistsError("Topic 'orders' already exists.")
    err = PartialFailureError("create_topics", {"orders": exists, "fresh": object()})
    assert str(err) == ("create_topics: 1 of 2 failed: 'orders': TopicAlreadyExistsError: "
                        "[TOPIC_ALREADY_EXISTS (36)] Topic 'orders' already exists.")
    assert err.errors == {"orders": exists}


def test_partial_failure_message_stays_bounded() -> None:
    results = {f"t{i}": TopicAlreadyExistsError(f"t{i}") for i in range(25)}
    message = str(PartialFailureError("create_topics", results))
    assert message.startswith("create_topics: 25 of 25 failed: 't0': TopicAlreadyExistsError")
    assert "'t9'" in message and "'t10'" not in message
    assert message.endswith("; and 15 more (see .errors)")


def test_out_of_range_ports_are_typed_errors_that_say_so() -> None:
    with pytest.raises(ConfigError) as info:
        AsyncKafkaClient(bootstrap_servers="localhost:99999")
    assert str(info.value) == ("bootstrap.servers: the port of 'localhost:99999' must be in "
                               "1..65535")
    with pytest.raises(InvalidArgumentError, match=r"port must be in 1\.\.65535, got 99999"):
        TansuBroker(port=99999)
    run = subprocess.run([sys.executable, "-m", "kontrakt.registry.server", "--port", "99999"],
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == 2
    assert run.stderr.strip().endswith("error: --port must be in 0..65535, got 99999")
