"""Broker error code classes: the table, the Java client's classification, lookups."""

from __future__ import annotations

import inspect
import warnings
from typing import Any

import pytest

import kontrakt.errors as core
from kontrakt.errors import BrokerResponseError, KafkaError
from kontrakt.protocol import errors
from kontrakt.protocol.errors import (
    ERRORS_BY_CODE,
    CoordinatorLoadInProgressError,
    NotCoordinatorError,
    NotLeaderOrFollowerError,
    UnknownServerError,
    UnknownTopicOrPartitionError,
    for_code,
    raise_for_code,
)

# The Java client's hierarchy (org.apache.kafka.common.errors): codes whose exception extends
# InvalidMetadataException, and the further codes whose exception extends RetriableException.
JAVA_INVALID_METADATA = {3, 5, 6, 9, 13, 56, 72, 74, 80, 83, 84, 100, 103}
JAVA_RETRIABLE = JAVA_INVALID_METADATA | {
    2, 7, 14, 15, 16, 19, 20, 41, 47, 51, 70, 71, 75, 78, 88, 89, 106, 122, 123, 133,
}

CLASSES = list(ERRORS_BY_CODE.values())
IDS = [c.error_name for c in CLASSES]


def _expected_class_name(error_name: str) -> str:
    for suffix in ("_EXCEPTION", "_ERROR"):
        error_name = error_name.removesuffix(suffix)
    return "".join(p.capitalize() for p in error_name.split("_")) + "Error"


def test_table_covers_every_code_through_kafka_4_1() -> None:
    assert sorted(ERRORS_BY_CODE) == [-1, *range(1, 134)]
    names = [c.error_name for c in CLASSES]
    assert len(names) == len(set(names))
    classes = [c.__name__ for c in CLASSES]
    assert len(classes) == len(set(classes))


@pytest.mark.parametrize("cls", CLASSES, ids=IDS)
def test_each_class(cls: type[BrokerResponseError]) -> None:
    assert issubclass(cls, BrokerResponseError)
    assert issubclass(cls, KafkaError)
    assert cls.__module__ == "kontrakt.protocol.errors"
    assert cls.__name__ == _expected_class_name(cls.error_name)
    assert cls.__name__ in errors.__all__
    assert getattr(errors, cls.__name__) is cls
    doc = inspect.cleandoc(cls.__doc__ or "")
    assert doc and doc.endswith(".")
    assert cls.description == doc.replace("\n", " ")
    assert cls.error_name == cls.error_name.upper()
    assert isinstance(cls.retriable, bool)
    assert isinstance(cls.invalid_metadata, bool)


@pytest.mark.parametrize("cls", CLASSES, ids=IDS)
def test_flags_follow_the_java_client(cls: type[BrokerResponseError]) -> None:
    assert cls.invalid_metadata is (cls.code in JAVA_INVALID_METADATA)
    assert cls.retriable is (cls.code in JAVA_RETRIABLE)
    if cls.invalid_metadata:
        # InvalidMetadataException is itself a RetriableException.
        assert cls.retriable


def test_flag_samples_by_name() -> None:
    assert NotLeaderOrFollowerError.retriable and NotLeaderOrFollowerError.invalid_metadata
    assert UnknownTopicOrPartitionError.invalid_metadata
    # Coordinator errors are retriable but need a FindCoordinator, not a metadata refresh.
    assert NotCoordinatorError.retriable and not NotCoordinatorError.invalid_metadata
    assert CoordinatorLoadInProgressError.retriable
    assert not CoordinatorLoadInProgressError.invalid_metadata
    assert errors.InvalidProducerEpochError.retriable
    assert not errors.ProducerFencedError.retriable
    assert not errors.TopicAuthorizationFailedError.retriable
    assert errors.KafkaStorageError.invalid_metadata
    assert errors.UnknownLeaderEpochError.retriable
    assert not errors.UnknownLeaderEpochError.invalid_metadata


@pytest.mark.parametrize("cls", CLASSES, ids=IDS)
def test_for_code_round_trip(cls: type[BrokerResponseError]) -> None:
    assert for_code(cls.code) is cls
    with pytest.raises(cls) as info:
        raise_for_code(cls.code, "broker says why")
    assert type(info.value) is cls
    text = str(info.value)
    assert text == f"[{cls.error_name} ({cls.code})] broker says why"
    with pytest.raises(cls, match=r"\(" + str(cls.code) + r"\)\] ") as info2:
        raise_for_code(cls.code)
    assert cls.description in str(info2.value)


def test_no_error_raises_nothing() -> None:
    raise_for_code(0)  # must not raise
    raise_for_code(0, "ignored")


@pytest.mark.parametrize("code", [134, 999, 32767, -2, -32768])
def test_unknown_codes_keep_their_code(code: int) -> None:
    cls = for_code(code)
    assert cls.code == code
    assert issubclass(cls, UnknownServerError)
    assert not cls.retriable and not cls.invalid_metadata
    assert for_code(code) is cls  # generated once
    assert cls.__doc__
    assert code not in ERRORS_BY_CODE
    with pytest.raises(UnknownServerError) as info:
        raise_for_code(code, "from a newer broker")
    assert info.value.code == code
    assert f"({code})" in str(info.value)


@pytest.mark.parametrize("bad", [True, "3", 3.0, None])
def test_for_code_rejects_non_ints(bad: object) -> None:
    with pytest.raises(TypeError):
        for_code(bad)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        raise_for_code(bad)  # type: ignore[arg-type]


@pytest.mark.parametrize("bad", [0, 32768, -32769])
def test_for_code_rejects_impossible_codes(bad: int) -> None:
    with pytest.raises(ValueError):
        for_code(bad)


def test_shared_names_are_catchable_as_the_general_errors() -> None:
    assert issubclass(errors.UnsupportedVersionError, core.UnsupportedVersionError)
    assert issubclass(errors.CorruptMessageError, core.CorruptMessageError)
    assert issubclass(errors.TransactionAbortableError, core.TransactionAbortableError)
    with pytest.raises(core.UnsupportedVersionError):
        raise_for_code(35)
    with pytest.raises(core.TransactionAbortableError):
        raise_for_code(120)
    # A broker's CORRUPT_MESSAGE is retriable (a local decode failure is not).
    assert errors.CorruptMessageError.retriable
    assert not core.CorruptMessageError.retriable


# kafka-python names a few codes differently from Kafka's current protocol guide.
KAFKA_PYTHON_OLD_NAMES = {
    -1: "UNKNOWN",
    6: "NOT_LEADER_FOR_PARTITION",
    10: "MESSAGE_SIZE_TOO_LARGE",
    17: "INVALID_TOPIC",
    39: "INVALID_REPLICATION_ASSIGNMENT",
}


def test_codes_and_names_agree_with_kafka_python() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        import kafka.errors as kp

    theirs: dict[int, str] = {}
    for obj in vars(kp).values():
        if isinstance(obj, type) and issubclass(obj, kp.BrokerResponseError):
            kp_cls: Any = obj
            errno = getattr(kp_cls, "errno", None)
            if isinstance(errno, int) and errno != 0:
                theirs[errno] = kp_cls.message
    assert len(theirs) > 100
    for code, name in theirs.items():
        assert code in ERRORS_BY_CODE, code
        assert KAFKA_PYTHON_OLD_NAMES.get(code, ERRORS_BY_CODE[code].error_name) == name, code
