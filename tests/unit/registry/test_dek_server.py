"""The embedded server's DEK registry (``/dek-registry/v1``) over raw HTTP: Confluent's paths,
shapes, statuses and error codes (DekRegistryResource / DekRegistryErrors), and persistence
in the registry's journal."""

from __future__ import annotations

import base64
import os
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from kontrakt.registry.server import CONTENT_TYPE, RegistryServer

ROOT = "/dek-registry/v1/keks"
WRAPPED = base64.b64encode(b"\x07" * 60).decode()


@pytest.fixture
def srv() -> Iterator[RegistryServer]:
    with RegistryServer() as server:
        yield server


@pytest.fixture
def http(srv: RegistryServer) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=srv.url, timeout=10) as client:
        yield client


def err(resp: httpx.Response) -> tuple[int, int]:
    assert resp.headers["content-type"] == CONTENT_TYPE
    return resp.status_code, resp.json()["error_code"]


def kek(http: httpx.Client, name: str = "k1", **extra: Any) -> httpx.Response:
    return http.post(ROOT, json={"name": name, "kmsType": "local-kms", "kmsKeyId": "id1",
                                 **extra})


def dek(http: httpx.Client, subject: str = "s-value", kek_name: str = "k1",
        **extra: Any) -> httpx.Response:
    body = {"subject": subject, "encryptedKeyMaterial": WRAPPED, **extra}
    return http.post(f"{ROOT}/{kek_name}/deks/{subject}", json=body)


def test_kek_create_get_list_update_conflict(http: httpx.Client) -> None:
    created = kek(http, doc="people", kmsProps={"b": "2", "a": "1"})
    assert created.status_code == 200
    body = created.json()
    assert {k: body[k] for k in ("name", "kmsType", "kmsKeyId", "kmsProps", "doc", "shared",
                                 "deleted")} == {
        "name": "k1", "kmsType": "local-kms", "kmsKeyId": "id1",
        "kmsProps": {"a": "1", "b": "2"}, "doc": "people", "shared": False, "deleted": False}
    assert isinstance(body["ts"], int)
    assert http.get(f"{ROOT}/k1").json() == body
    # an existing KEK, equal or not, is a conflict (clients then read the stored one)
    assert err(kek(http, doc="people", kmsProps={"a": "1", "b": "2"})) == (409, 40971)
    assert err(kek(http, kmsKeyId="other")) == (409, 40971)
    kek(http, "k2")
    assert http.get(ROOT).json() == ["k1", "k2"]
    updated = http.put(f"{ROOT}/k1", json={"shared": True, "doc": "d2"}).json()
    assert (updated["shared"], updated["doc"], updated["kmsKeyId"]) == (True, "d2", "id1")
    assert err(http.put(f"{ROOT}/nope", json={"doc": "x"})) == (404, 40470)
    assert err(http.get(f"{ROOT}/nope")) == (404, 40470)


@pytest.mark.parametrize("body", [
    {"kmsType": "local-kms", "kmsKeyId": "x"},  # no name
    {"name": "1starts-with-digit", "kmsType": "local-kms", "kmsKeyId": "x"},
    {"name": "has space", "kmsType": "local-kms", "kmsKeyId": "x"},
    {"name": "x" * 65, "kmsType": "local-kms", "kmsKeyId": "x"},
    {"name": "ok", "kmsType": "local-kms"},  # no kmsKeyId
    {"name": "ok", "kmsKeyId": "x"},  # no kmsType
])
def test_invalid_kek_info_is_42271(http: httpx.Client, body: dict[str, Any]) -> None:
    assert err(http.post(ROOT, json=body)) == (422, 42271)


def test_kek_soft_delete_undelete_and_permanent_delete(http: httpx.Client) -> None:
    kek(http)
    assert err(http.delete(f"{ROOT}/k1", params={"permanent": "true"})) == (404, 40471)
    assert http.delete(f"{ROOT}/k1").status_code == 204
    assert err(http.get(f"{ROOT}/k1")) == (404, 40470)
    assert http.get(f"{ROOT}/k1", params={"deleted": "true"}).json()["deleted"] is True
    assert http.get(ROOT).json() == []
    assert http.get(ROOT, params={"deleted": "true"}).json() == ["k1"]
    assert http.post(f"{ROOT}/k1/undelete").status_code == 204
    assert http.get(f"{ROOT}/k1").json()["deleted"] is False
    assert http.delete(f"{ROOT}/k1").status_code == 204
    # a create equal to a soft-deleted KEK undeletes it, as Confluent's
    assert kek(http).json()["deleted"] is False
    http.delete(f"{ROOT}/k1")
    assert http.delete(f"{ROOT}/k1", params={"permanent": "true"}).status_code == 204
    assert err(http.get(f"{ROOT}/k1", params={"deleted": "true"})) == (404, 40470)
    assert err(http.delete(f"{ROOT}/k1")) == (404, 40470)


def test_dek_create_get_versions_and_latest(http: httpx.Client) -> None:
    kek(http)
    first = dek(http)
    assert first.status_code == 200
    body = first.json()
    assert {k: body[k] for k in ("kekName", "subject", "version", "algorithm",
                                 "encryptedKeyMaterial", "deleted")} == {
        "kekName": "k1", "subject": "s-value", "version": 1, "algorithm": "AES256_GCM",
        "encryptedKeyMaterial": WRAPPED, "deleted": False}
    assert "keyMaterial" not in body  # not shared: the registry never holds the raw key
    assert err(dek(http)) == (409, 40971)
    assert dek(http, version=2).json()["version"] == 2
    assert dek(http, algorithm="AES256_SIV").json()["algorithm"] == "AES256_SIV"
    # the older form without the subject in the path
    old = http.post(f"{ROOT}/k1/deks", json={"subject": "t-value",
                                             "encryptedKeyMaterial": WRAPPED})
    assert old.json()["subject"] == "t-value"
    assert http.get(f"{ROOT}/k1/deks").json() == ["s-value", "t-value"]
    assert http.get(f"{ROOT}/k1/deks/s-value/versions").json() == [1, 2]
    assert http.get(f"{ROOT}/k1/deks/s-value/versions",
                    params={"algorithm": "AES256_SIV"}).json() == [1]
    assert http.get(f"{ROOT}/k1/deks/s-value").json()["version"] == 1  # bare: version 1
    for latest in ("latest", "-1"):
        assert http.get(f"{ROOT}/k1/deks/s-value/versions/{latest}").json()["version"] == 2
    assert http.get(f"{ROOT}/k1/deks/s-value/versions/2").json()["version"] == 2
    assert err(http.get(f"{ROOT}/k1/deks/s-value/versions/3")) == (404, 40470)
    assert err(http.get(f"{ROOT}/k1/deks/nope/versions/1")) == (404, 40470)
    assert err(http.get(f"{ROOT}/k9/deks/s-value/versions/1")) == (404, 40470)
    assert err(http.get(f"{ROOT}/k9/deks")) == (404, 40470)
    for bad in ("0", "x", "2147483648"):
        assert err(http.get(f"{ROOT}/k1/deks/s-value/versions/{bad}")) == (422, 42202)
    assert err(http.get(f"{ROOT}/k1/deks/s-value",
                        params={"algorithm": "ROT13"})) == (400, 400)


def test_dek_refusals(http: httpx.Client) -> None:
    assert err(dek(http, kek_name="missing")) == (404, 40470)
    kek(http)
    # a KEK that is not shared needs the client's wrapped key
    assert err(http.post(f"{ROOT}/k1/deks/s", json={"subject": "s"})) == (422, 42271)
    assert err(dek(http, encryptedKeyMaterial="not base64!")) == (422, 42271)
    assert err(dek(http, version=0)) == (422, 42271)
    assert err(http.post(f"{ROOT}/k1/deks/s", json={"subject": "other",
                                                   "encryptedKeyMaterial": WRAPPED})) == (
        422, 42271)
    assert err(http.post(f"{ROOT}/k1/deks/a%01b", json={
        "subject": "a\x01b", "encryptedKeyMaterial": WRAPPED})) == (422, 42271)
    assert err(http.patch(f"{ROOT}/k1")) == (405, 405)


def test_dek_delete_undelete_and_the_kek_they_hold(http: httpx.Client) -> None:
    kek(http)
    dek(http)
    dek(http, version=2)
    assert err(http.delete(f"{ROOT}/k1")) == (422, 42272)  # DEKs still there
    assert err(http.delete(f"{ROOT}/k1/deks/s-value/versions/1",
                           params={"permanent": "true"})) == (404, 40471)
    assert http.delete(f"{ROOT}/k1/deks/s-value/versions/1").status_code == 204
    assert http.get(f"{ROOT}/k1/deks/s-value/versions").json() == [2]
    assert http.get(f"{ROOT}/k1/deks/s-value/versions",
                    params={"deleted": "true"}).json() == [1, 2]
    assert http.post(f"{ROOT}/k1/deks/s-value/versions/1/undelete").status_code == 204
    assert http.get(f"{ROOT}/k1/deks/s-value/versions").json() == [1, 2]
    assert http.delete(f"{ROOT}/k1/deks/s-value").status_code == 204
    assert err(http.get(f"{ROOT}/k1/deks/s-value/versions/latest")) == (404, 40470)
    # soft-deleted DEKs let the KEK be soft-deleted, not permanently deleted
    assert http.delete(f"{ROOT}/k1").status_code == 204
    assert err(http.post(f"{ROOT}/k1/deks/s-value/undelete")) == (404, 40472)
    assert err(http.delete(f"{ROOT}/k1", params={"permanent": "true"})) == (422, 42272)
    assert http.post(f"{ROOT}/k1/undelete").status_code == 204
    assert http.post(f"{ROOT}/k1/deks/s-value/undelete").status_code == 204
    assert http.get(f"{ROOT}/k1/deks/s-value/versions").json() == [1, 2]
    assert err(http.delete(f"{ROOT}/k1/deks/nope")) == (404, 40470)
    http.delete(f"{ROOT}/k1/deks/s-value")
    assert http.delete(f"{ROOT}/k1/deks/s-value",
                       params={"permanent": "true"}).status_code == 204
    assert http.get(f"{ROOT}/k1/deks", params={"deleted": "true"}).json() == []
    http.delete(f"{ROOT}/k1")
    assert http.delete(f"{ROOT}/k1", params={"permanent": "true"}).status_code == 204


def test_shared_kek_deks_need_the_kms(srv: RegistryServer, http: httpx.Client) -> None:
    """For a shared KEK the registry makes and unwraps DEKs, which it can only do when it
    reaches the KMS: 500 / 50070 without it, as Confluent's."""
    pytest.importorskip("cryptography")
    from kontrakt.serde.rules.encryption_kms import LocalKmsDriver

    kek(http, shared=True)
    saved = os.environ.pop("LOCAL_SECRET", None)
    try:
        assert err(http.post(f"{ROOT}/k1/deks/s", json={"subject": "s"})) == (500, 50070)
    finally:
        if saved is not None:
            os.environ["LOCAL_SECRET"] = saved
    srv.app.dek.kms_config = {"secret": "server-secret"}
    made = http.post(f"{ROOT}/k1/deks/s", json={"subject": "s"}).json()
    raw = base64.b64decode(made["keyMaterial"])
    assert raw[:2] == b"\x1a\x20" and len(raw) == 34  # a Tink AES256_GCM key
    aead = LocalKmsDriver().new_aead({"secret": "server-secret"}, "local-kms://id1")
    assert aead.decrypt(base64.b64decode(made["encryptedKeyMaterial"]), b"") == raw
    assert http.get(f"{ROOT}/k1/deks/s").json()["keyMaterial"] == made["keyMaterial"]
    assert err(dek(http, subject="s")) == (409, 40971)


def test_keys_survive_a_restart(tmp_path: Any) -> None:
    path = str(tmp_path / "registry.journal")
    with RegistryServer(storage=path) as srv, httpx.Client(base_url=srv.url) as http:
        kek(http)
        kek(http, "k2")
        dek(http)
        dek(http, version=2)
        http.delete(f"{ROOT}/k1/deks/s-value/versions/2")
        http.delete(f"{ROOT}/k2")
        before = (http.get(f"{ROOT}/k1").json(),
                  http.get(f"{ROOT}/k1/deks/s-value/versions/2",
                           params={"deleted": "true"}).json())
    with RegistryServer(storage=path) as srv, httpx.Client(base_url=srv.url) as http:
        assert (http.get(f"{ROOT}/k1").json(),
                http.get(f"{ROOT}/k1/deks/s-value/versions/2",
                         params={"deleted": "true"}).json()) == before
        assert http.get(ROOT, params={"deleted": "true"}).json() == ["k1", "k2"]
        assert http.get(ROOT).json() == ["k1"]
        assert http.get(f"{ROOT}/k1/deks/s-value/versions").json() == [1]
        http.delete(f"{ROOT}/k2", params={"permanent": "true"})
    with RegistryServer(storage=path) as srv, httpx.Client(base_url=srv.url) as http:
        assert http.get(ROOT, params={"deleted": "true"}).json() == ["k1"]


def test_a_slow_kms_does_not_hold_the_registry_lock() -> None:
    """A shared KEK's DEK is made by the KMS outside the registry's lock: while the KMS
    call is pending, other requests are answered (they waited for it before)."""
    import json
    import threading

    pytest.importorskip("cryptography")
    from kontrakt.registry.server import RegistryApp, RegistryState
    from kontrakt.serde.rules import encryption_kms

    entered, gate = threading.Event(), threading.Event()

    class SlowKms(encryption_kms.KmsDriver):
        def get_key_url_prefix(self) -> str:
            return "slow-kms://"

        def new_aead(self, config: Any, key_url: str) -> Any:
            entered.set()
            gate.wait(10)
            return encryption_kms.LocalKmsDriver().new_aead({"secret": "s"}, key_url)

    encryption_kms.register_kms_driver(SlowKms())
    app = RegistryApp(RegistryState())
    try:
        assert app.handle("POST", ROOT, "", json.dumps({
            "name": "k1", "kmsType": "slow-kms", "kmsKeyId": "x",
            "shared": True}).encode())[0] == 200
        made: list[Any] = []
        maker = threading.Thread(target=lambda: made.append(app.handle(
            "POST", f"{ROOT}/k1/deks/s", "", json.dumps({"subject": "s"}).encode())))
        maker.start()
        assert entered.wait(10)
        other: list[Any] = []
        reader = threading.Thread(target=lambda: other.append(app.handle(
            "GET", "/subjects", "", None)))
        reader.start()
        reader.join(5)
        assert other == [(200, [])]
        gate.set()
        maker.join(10)
        assert made[0][0] == 200 and made[0][1]["version"] == 1
    finally:
        gate.set()
        encryption_kms.clear_kms_drivers()
