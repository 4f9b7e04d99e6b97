"""Kontrakt's DEK registry clients (sync and async, one sans-I/O core) against the embedded
server: every operation, the typed errors, caching, and the transport they share with the
schema registry client (auth included)."""

from __future__ import annotations

import asyncio
import base64
from collections.abc import Iterator
from typing import Any

import pytest

from kontrakt.registry import (
    AsyncDekRegistryClient,
    AsyncMockSchemaRegistryClient,
    Dek,
    DekRegistryClient,
    InvalidKeyError,
    InvalidVersionError,
    Kek,
    KeyExistsError,
    KeyNotFoundError,
    KeyNotSoftDeletedError,
    KeyReferenceExistsError,
    KeySoftDeletedError,
    MockSchemaRegistryClient,
    SchemaRegistryClient,
    SchemaRegistryError,
)
from kontrakt.registry.server import RegistryServer

WRAPPED = base64.b64encode(b"\x05" * 60).decode()


@pytest.fixture
def srv() -> Iterator[RegistryServer]:
    with RegistryServer() as server:
        yield server


def _script(c: Any) -> Any:
    """The same calls for either client; a generator whose yields are the client's results
    (awaited by the async driver), so both forms run one script."""
    kek = yield c.register_kek("k1", "local-kms", "id1", kms_props={"p": "v"}, doc="doc")
    assert isinstance(kek, Kek)
    assert (kek.name, kek.kms_type, kek.kms_key_id, dict(kek.kms_props), kek.doc,
            kek.shared, kek.deleted) == ("k1", "local-kms", "id1", {"p": "v"}, "doc", False,
                                         False)
    assert (yield c.get_kek("k1")) == kek
    assert (yield c.get_kek_names()) == ["k1"]
    updated = yield c.update_kek("k1", doc="doc2")
    assert updated.doc == "doc2" and updated.kms_key_id == "id1"
    dek = yield c.register_dek("k1", "s-value", WRAPPED)
    assert isinstance(dek, Dek)
    assert (dek.kek_name, dek.subject, dek.version, dek.algorithm,
            dek.encrypted_key_material_bytes, dek.key_material) == (
        "k1", "s-value", 1, "AES256_GCM", b"\x05" * 60, None)
    siv = yield c.register_dek("k1", "s-value", WRAPPED, "AES256_SIV", 2)
    assert (siv.algorithm, siv.version) == ("AES256_SIV", 2)
    assert (yield c.get_dek("k1", "s-value")) == dek
    assert (yield c.get_dek("k1", "s-value", "AES256_SIV", "latest")) == siv
    assert (yield c.get_dek_subjects("k1")) == ["s-value"]
    assert (yield c.get_dek_versions("k1", "s-value", "AES256_SIV")) == [2]
    yield c.delete_dek_version("k1", "s-value", 2, "AES256_SIV")
    assert (yield c.get_dek_versions("k1", "s-value", "AES256_SIV")) == []
    yield c.undelete_dek_version("k1", "s-value", 2, "AES256_SIV")
    assert (yield c.get_dek_versions("k1", "s-value", "AES256_SIV")) == [2]
    yield c.delete_dek("k1", "s-value")
    yield c.delete_kek("k1")
    assert (yield c.get_kek_names(deleted=True)) == ["k1"]
    assert (yield c.get_kek("k1", deleted=True)).deleted is True
    yield c.undelete_kek("k1")
    yield c.undelete_dek("k1", "s-value")
    assert (yield c.get_dek_versions("k1", "s-value")) == [1]
    return "done"


def _sync(c: DekRegistryClient) -> Any:
    gen = _script(c)
    try:
        value = next(gen)
        while True:
            value = gen.send(value)
    except StopIteration as stop:
        return stop.value


async def _async(c: AsyncDekRegistryClient) -> Any:
    gen = _script(c)
    try:
        value = next(gen)
        while True:
            value = gen.send(await value)
    except StopIteration as stop:
        return stop.value


def test_every_operation_sync_and_async(srv: RegistryServer) -> None:
    with DekRegistryClient({"url": srv.url}) as c:
        assert _sync(c) == "done"

    async def main() -> None:
        # a second registry, so that the script starts from empty
        with RegistryServer() as other:
            async with AsyncDekRegistryClient({"url": other.url}) as ac:
                assert await _async(ac) == "done"
    asyncio.run(main())


def test_typed_errors(srv: RegistryServer) -> None:
    with DekRegistryClient({"url": srv.url, "max.retries": 0}) as c:
        with pytest.raises(KeyNotFoundError) as info:
            c.get_kek("nope")
        assert (info.value.http_status_code, info.value.error_code) == (404, 40470)
        with pytest.raises(InvalidKeyError):
            c.register_kek("bad name", "local-kms", "id")
        c.register_kek("k1", "local-kms", "id")
        c.clear_caches()  # a cached KEK answers without asking
        with pytest.raises(KeyExistsError) as conflict:
            c.register_kek("k1", "local-kms", "id")
        assert conflict.value.http_status_code == 409
        with pytest.raises(InvalidKeyError):  # not shared: the client must wrap the key
            c.register_dek("k1", "s", None)
        c.register_dek("k1", "s", WRAPPED)
        with pytest.raises(KeyReferenceExistsError):
            c.delete_kek("k1")
        with pytest.raises(KeyNotSoftDeletedError):
            c.delete_dek("k1", "s", permanent=True)
        c.delete_dek("k1", "s")
        c.delete_kek("k1")
        with pytest.raises(KeySoftDeletedError):
            c.undelete_dek("k1", "s")
        with pytest.raises(InvalidVersionError):
            c.get_dek("k1", "s", version=0, deleted=True)
        with pytest.raises(ValueError, match="unknown DEK algorithm"):
            c.get_dek("k1", "s", "ROT13")


def test_reads_are_cached_and_a_new_dek_refreshes_latest(srv: RegistryServer) -> None:
    with SchemaRegistryClient({"url": srv.url}) as registry:
        c = DekRegistryClient(client=registry)  # shares the registry client's transport
        c.register_kek("k1", "local-kms", "id")
        c.register_dek("k1", "s", WRAPPED)
        sent = registry.requests_sent
        for _ in range(3):
            c.get_kek("k1")
            c.get_dek("k1", "s")
        assert c.get_dek("k1", "s", version="latest").version == 1
        assert registry.requests_sent == sent + 1  # only "latest" was asked, once
        c.register_dek("k1", "s", WRAPPED, version=2)
        assert c.get_dek("k1", "s", version=-1).version == 2
        c.close()  # the borrowed transport stays open
        assert registry.get_subjects() == []


def test_the_mock_clients_serve_the_dek_registry() -> None:
    mock = MockSchemaRegistryClient()
    c = DekRegistryClient(client=mock)
    c.register_kek("k1", "local-kms", "id")
    assert c.register_dek("k1", "s", WRAPPED).version == 1
    assert mock.app.state.store.dek.keks["k1"]["kmsKeyId"] == "id"

    async def main() -> None:
        amock = AsyncMockSchemaRegistryClient(state=mock.app.state)
        ac = AsyncDekRegistryClient(client=amock)
        assert (await ac.get_dek("k1", "s")).encrypted_key_material == WRAPPED
    asyncio.run(main())


def test_basic_auth_goes_with_dek_calls() -> None:
    """The DEK client authenticates as the registry client does (one transport)."""
    from kontrakt.registry.server import Authenticator

    with RegistryServer(auth=Authenticator(users={"u": ("p", "read-write")})) as srv:
        with DekRegistryClient({"url": srv.url, "basic.auth.user.info": "u:p"}) as c:
            assert c.register_kek("k1", "local-kms", "id").name == "k1"
        with DekRegistryClient({"url": srv.url, "max.retries": 0}) as anonymous:
            with pytest.raises(SchemaRegistryError) as info:
                anonymous.get_kek("k1")
            assert info.value.http_status_code == 401
