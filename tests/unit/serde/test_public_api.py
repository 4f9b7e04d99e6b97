from __future__ import annotations

import kontrakt.serde as serde
from kontrakt.serde._base import AsyncSerializer, SyncSerializer


def test_all_names_resolve() -> None:
    assert sorted(serde.__all__) == sorted(set(serde.__all__))
    for name in serde.__all__:
        assert getattr(serde, name) is not None, name


def test_sync_and_async_forms_share_one_core() -> None:
    pairs = [("AvroSerializer", "AsyncAvroSerializer"), ("JSONSerializer", "AsyncJSONSerializer"),
             ("ProtobufSerializer", "AsyncProtobufSerializer")]
    for sync_name, async_name in pairs:
        sync_cls, async_cls = getattr(serde, sync_name), getattr(serde, async_name)
        assert issubclass(sync_cls, SyncSerializer) and issubclass(async_cls, AsyncSerializer)
        # the per-record logic lives on the shared core, not on either shell
        assert "__call__" not in vars(sync_cls) and "__call__" not in vars(async_cls)
