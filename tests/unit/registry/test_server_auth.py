"""Optional authentication of the embedded registry: basic users and bearer tokens, roles."""

from __future__ import annotations

import json
import logging
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from kontrakt.errors import KontraktError
from kontrakt.registry import SchemaRegistryClient
from kontrakt.registry._errors import SchemaRegistryError
from kontrakt.registry.server import Authenticator, HttpLimits, RegistryServer

SCHEMA = {"schema": json.dumps({"type": "record", "name": "A",
                                "fields": [{"name": "a", "type": "int"}]})}
AUTH = Authenticator(users={"writer": ("w-secret", "read-write"),
                            "reader": ("r-secret", "read-only")},
                     tokens={"tok-rw": "read-write", "tok-ro": "read-only"})


@pytest.fixture
def srv() -> Iterator[RegistryServer]:
    with RegistryServer(auth=AUTH) as server:
        yield server


def test_requests_without_valid_credentials_get_401(srv: RegistryServer) -> None:
    for auth in (None, ("writer", "wrong"), ("nobody", "w-secret")):
        r = httpx.get(srv.url + "/subjects", auth=auth, timeout=5)
        assert r.status_code == 401 and r.json()["error_code"] == 401
        assert "Basic" in r.headers["www-authenticate"]
    for header in ("Bearer nope", "Bearer", "Basic !!!", "Digest x", "tok-rw"):
        r = httpx.get(srv.url + "/subjects", headers={"Authorization": header}, timeout=5)
        assert r.status_code == 401, header


def test_roles(srv: RegistryServer) -> None:
    with httpx.Client(base_url=srv.url, auth=("writer", "w-secret"), timeout=5) as rw, \
            httpx.Client(base_url=srv.url, auth=("reader", "r-secret"), timeout=5) as ro, \
            httpx.Client(base_url=srv.url, headers={"Authorization": "Bearer tok-ro"},
                         timeout=5) as ro_token:
        assert rw.post("/subjects/s/versions", json=SCHEMA).json()["id"] == 1
        for client in (ro, ro_token):
            assert client.get("/subjects").json() == ["s"]
            # Lookups and compatibility tests only read.
            assert client.post("/subjects/s", json=SCHEMA).json()["version"] == 1
            assert client.post("/compatibility/subjects/s/versions/latest",
                               json=SCHEMA).json() == {"is_compatible": True}
            for method, path, body in [("POST", "/subjects/s/versions", SCHEMA),
                                       ("DELETE", "/subjects/s", None),
                                       ("PUT", "/config", {"compatibility": "NONE"}),
                                       ("PUT", "/mode/s", {"mode": "READONLY"})]:
                r = client.request(method, path, json=body)
                assert (r.status_code, r.json()["error_code"]) == (403, 40301), (method, path)
        assert rw.get("/subjects/s/versions").json() == [1]
    r = httpx.delete(srv.url + "/subjects/s", headers={"Authorization": "Bearer tok-rw"})
    assert r.json() == [1]


def test_unauthenticated_body_is_not_read(srv: RegistryServer) -> None:
    host, port = srv.url.removeprefix("http://").rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=5) as sock:
        # A 10 MB body announced but never sent: the answer comes at once, not after it.
        sock.sendall(b"POST /subjects/s/versions HTTP/1.1\r\nHost: x\r\n"
                     b"Content-Length: 10000000\r\n\r\n")
        assert sock.recv(4096).startswith(b"HTTP/1.1 401 ")


def test_kontrakt_client_with_basic_and_bearer_credentials(srv: RegistryServer) -> None:
    with SchemaRegistryClient({"url": srv.url, "basic.auth.user.info": "writer:w-secret"}) as c:
        assert c.get_subjects() == []
    with SchemaRegistryClient({"url": srv.url, "bearer.auth.credentials.source":
                               "STATIC_TOKEN", "bearer.auth.token": "tok-ro",
                               "bearer.auth.logical.cluster": "lsrc",
                               "bearer.auth.identity.pool.id": "pool"}) as c:
        assert c.get_subjects() == []
    with SchemaRegistryClient({"url": srv.url, "max.retries": 0}) as c, \
            pytest.raises(SchemaRegistryError) as info:
        c.get_subjects()
    assert info.value.http_status_code == 401


def test_authenticator_validates_and_hides_secrets(tmp_path: Any) -> None:
    assert "w-secret" not in repr(AUTH) and "tok-rw" not in repr(AUTH)
    with pytest.raises(ValueError, match="role"):
        Authenticator(users={"u": ("p", "admin")})  # type: ignore[dict-item]
    with pytest.raises(ValueError, match="at least one"):
        Authenticator()
    path = tmp_path / "auth.json"
    path.write_text(json.dumps({"users": {"u": {"password": "p", "role": "read-only"}},
                                "tokens": {"t": "read-write"}}))
    loaded = Authenticator.from_file(str(path))
    assert loaded.users == {"u": ("p", "read-only")} and loaded.tokens == {"t": "read-write"}
    path.write_text(json.dumps({"users": {"u": {"role": "read-only"}}}))
    with pytest.raises(ValueError, match="auth file"):
        Authenticator.from_file(str(path))


def test_no_exposure_warning_with_auth(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="kontrakt.registry.server"):
        server = RegistryServer("0.0.0.0", auth=AUTH)  # bound, never served, closed at once
        server.bind()
        server.stop()
    assert not caplog.records


def test_cli_takes_users_from_the_environment() -> None:
    env = {**os.environ, "PYTHONPATH": os.getcwd(),
           "KONTRAKT_REGISTRY_PASSWORD_alice": "s3cret", "RO_TOKEN": "ro-token"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "kontrakt.registry.server", "--port", "0",
         "--user", "alice=read-write", "--token-env", "RO_TOKEN=read-only"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.endswith("(authentication required)\n"), line
        url = line.split(" on ", 1)[1].split(" ", 1)[0]
        assert httpx.get(url + "/subjects", timeout=5).status_code == 401
        assert httpx.post(url + "/subjects/c/versions", json=SCHEMA, auth=("alice", "s3cret"),
                          timeout=5).status_code == 200
        ro = {"Authorization": "Bearer ro-token"}
        assert httpx.get(url + "/subjects", headers=ro, timeout=5).json() == ["c"]
        assert httpx.delete(url + "/subjects/c", headers=ro, timeout=5).status_code == 403
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        for stream in (proc.stdout, proc.stderr):
            if stream is not None:
                stream.close()


@pytest.fixture(scope="module")
def tls_files(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str]:
    if shutil.which("openssl") is None:
        pytest.skip("the openssl command is needed to make a test certificate")
    path = tmp_path_factory.mktemp("tls")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                    "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
                    "-keyout", "key.pem", "-out", "cert.pem"],
                   cwd=path, check=True, capture_output=True, timeout=60)
    return str(path / "cert.pem"), str(path / "key.pem")


def test_https_with_credentials(tls_files: tuple[str, str]) -> None:
    cert, key = tls_files
    tls = RegistryServer.tls_context(cert, key)
    limits = HttpLimits(head_timeout=0.5)
    with RegistryServer(auth=AUTH, ssl_context=tls, limits=limits) as srv:
        assert srv.url.startswith("https://127.0.0.1:")
        with SchemaRegistryClient({"url": srv.url, "ssl.ca.location": cert,
                                   "basic.auth.user.info": "writer:w-secret"}) as c:
            assert c.get_subjects() == []
        with SchemaRegistryClient({"url": srv.url, "basic.auth.user.info": "writer:w-secret",
                                   "max.retries": 0}) as c, pytest.raises(KontraktError):
            c.get_subjects()  # the self-signed certificate is not trusted by default
        host, port = srv.url.removeprefix("https://").rsplit(":", 1)
        # Plain HTTP to the TLS port is not served, and a client that never starts its
        # handshake is cut after the head deadline.
        for data in (b"GET /subjects HTTP/1.1\r\nHost: x\r\n\r\n", b""):
            with socket.create_connection((host, int(port)), timeout=5) as sock:
                sock.sendall(data)
                start = time.monotonic()
                try:
                    while sock.recv(4096):
                        pass
                except ConnectionResetError:
                    pass
                assert time.monotonic() - start < 3
