from __future__ import annotations

from types import SimpleNamespace

import pytest

from kontrakt.errors import SerializationError
from kontrakt.serde import (
    MessageField,
    SerializationContext,
    record_subject_name_strategy,
    reference_subject_name_strategy,
    topic_record_subject_name_strategy,
    topic_subject_name_strategy,
)


def test_strategies() -> None:
    key = SerializationContext("orders", MessageField.KEY)
    value = SerializationContext("orders", MessageField.VALUE)
    assert topic_subject_name_strategy(key, "a.B") == "orders-key"
    assert topic_subject_name_strategy(value, None) == "orders-value"
    assert record_subject_name_strategy(None, "a.B") == "a.B"
    assert topic_record_subject_name_strategy(value, "a.B") == "orders-a.B"
    assert topic_record_subject_name_strategy(value, None) is None
    ref = SimpleNamespace(name="common/money.proto")
    assert reference_subject_name_strategy(None, ref) == "common/money.proto"
    with pytest.raises(SerializationError):
        topic_subject_name_strategy(None, "x")
    with pytest.raises(SerializationError):
        topic_record_subject_name_strategy(None, "x")
