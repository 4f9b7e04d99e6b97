"""TLS transport against real TLS software.

Neither test broker speaks TLS (TEST-BROKERS.md), so Tansu runs behind a TLS terminator:
a thread per connection serving OpenSSL (through Python's ``ssl``) on one port and forwarding
plaintext to Tansu, which advertises the terminator's port. Certificates are made by the ``openssl``
command for this test: a CA, and a server certificate for 127.0.0.1 signed by it.
"""

from __future__ import annotations

import asyncio
import select
import socket
import ssl
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from kontrakt import AdminClient, Producer
from kontrakt.clients import AsyncKafkaClient
from kontrakt.clients._net.security import TlsCertificateError, TlsPlaintextListenerError
from kontrakt.errors import (
    AuthenticationError,
    ConfigError,
    KafkaConnectionError,
    NoBrokersAvailableError,
)
from kontrakt.protocol.messages import MetadataRequest
from kontrakt.testing import TansuBroker, free_port
from tests._certs import make_ca_and_server, openssl

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = make_ca_and_server(tmp_path_factory.mktemp("tls"))
    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "other.key", "-out",
            "other.pem", "-days", "2", "-subj", "/CN=someone else", cwd=d)
    return d


class TlsTerminator:
    """Accepts TLS on ``port`` and pipes plaintext to ``target``; stops on close()."""

    def __init__(self, port: int, target: tuple[str, int], certs: Path) -> None:
        self.ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self.ctx.load_cert_chain(certs / "server.pem", certs / "server.key")
        self.target = target
        self.sock = socket.create_server(("127.0.0.1", port))
        self.sock.settimeout(0.2)
        self.stopping = threading.Event()
        self.threads: list[threading.Thread] = []
        self.accepted = 0
        self.thread = threading.Thread(target=self._accept, daemon=True)
        self.thread.start()

    def _accept(self) -> None:
        while not self.stopping.is_set():
            try:
                raw, _ = self.sock.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            t = threading.Thread(target=self._serve, args=(raw,), daemon=True)
            t.start()
            self.threads.append(t)

    def _serve(self, raw: socket.socket) -> None:
        try:
            raw.settimeout(10)
            tls = self.ctx.wrap_socket(raw, server_side=True)
        except (OSError, ssl.SSLError):
            raw.close()
            return
        self.accepted += 1
        upstream = socket.create_connection(self.target, timeout=10)
        # One thread per connection does both directions: an SSL object read and written
        # from two threads at once is undefined in OpenSSL, and broke connections under load.
        try:
            self._pipe(tls, upstream)
        except OSError:
            pass
        finally:
            for s in (tls, upstream):
                try:
                    s.close()
                except OSError:
                    pass

    def _pipe(self, tls: ssl.SSLSocket, upstream: socket.socket) -> None:
        tls.settimeout(None)
        upstream.settimeout(None)
        while not self.stopping.is_set():
            # Bytes OpenSSL has decrypted already are invisible to select().
            if tls.pending():
                readable: list[socket.socket] = [tls]
            else:
                readable, _, _ = select.select([tls, upstream], [], [], 0.2)
            for src in readable:
                dst = upstream if src is tls else tls
                data = src.recv(65536)
                if not data:
                    return
                dst.sendall(data)

    def close(self) -> None:
        self.stopping.set()
        self.sock.close()
        self.thread.join(5)


@pytest.fixture
def tls_broker(certs: Path) -> Iterator[tuple[str, TlsTerminator]]:
    proxy_port = free_port("127.0.0.1")
    with TansuBroker(advertised_port=proxy_port) as broker:
        term = TlsTerminator(proxy_port, ("127.0.0.1", broker.port), certs)
        try:
            yield f"127.0.0.1:{proxy_port}", term
        finally:
            term.close()


def test_requests_over_tls(tls_broker: tuple[str, TlsTerminator], certs: Path) -> None:
    bootstrap, term = tls_broker

    async def main() -> None:
        async with AsyncKafkaClient(bootstrap_servers=bootstrap, security_protocol="SSL",
                                    ssl_ca_location=str(certs / "ca.pem")) as client:
            meta = await client.request(MetadataRequest(topics=None))
            assert meta.brokers[0].port == int(bootstrap.rsplit(":", 1)[1])
            # The advertised broker is reached over TLS too.
            await client.request(MetadataRequest(topics=[]), node=meta.brokers[0].node_id)

    asyncio.run(main())
    assert term.accepted >= 1


def test_untrusted_certificate_is_refused(tls_broker: tuple[str, TlsTerminator],
                                          certs: Path) -> None:
    bootstrap, _term = tls_broker

    async def main() -> None:
        client = AsyncKafkaClient(bootstrap_servers=bootstrap, security_protocol="SSL",
                                  ssl_ca_location=str(certs / "other.pem"),
                                  request_timeout_ms=2000, reconnect_backoff_ms=20)
        try:
            with pytest.raises((NoBrokersAvailableError, KafkaConnectionError)):
                await client.start()
        finally:
            await client.close()

    asyncio.run(main())


def test_missing_ca_file_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="TLS"):
        AsyncKafkaClient(bootstrap_servers="127.0.0.1:1", security_protocol="SSL",
                         ssl_ca_location=str(tmp_path / "missing.pem"))


def _tls_failure(bootstrap: str, **options: object) -> NoBrokersAvailableError:
    async def main() -> NoBrokersAvailableError:
        client = AsyncKafkaClient(**{"bootstrap_servers": bootstrap, "security_protocol": "SSL",
                                     "request_timeout_ms": 1500, "reconnect_backoff_ms": 20,
                                     "socket_connection_setup_timeout_ms": 500, **options})
        try:
            with pytest.raises(NoBrokersAvailableError) as info:
                await client.start()
            return info.value
        finally:
            await client.close()

    return asyncio.run(main())


def test_tls_to_a_plaintext_kafka_listener_fails_at_once(tansu_broker: TansuBroker) -> None:
    """Tansu's plaintext port waits for the rest of the 'request' a ClientHello seems to
    announce, so the handshake gets no answer; the client probes the port with a plaintext
    ApiVersions request, which Tansu answers: a fatal, typed error after about a second,
    from every client, with the default timeouts (it used to take request.timeout.ms, 30 s,
    and end as NoBrokersAvailableError)."""
    bootstrap = tansu_broker.bootstrap_servers
    conf = {"bootstrap.servers": bootstrap, "security.protocol": "SSL"}

    async def main() -> None:
        client = AsyncKafkaClient(conf)
        try:
            await client.request(MetadataRequest(topics=None))
        finally:
            await client.close()

    def sync_producer() -> None:
        with Producer(conf) as p:
            p.send_and_wait("t", b"x")

    def sync_admin() -> None:
        with AdminClient(conf) as a:
            a.list_topics()

    for call in (lambda: asyncio.run(main()), sync_producer, sync_admin):
        start = time.monotonic()
        with pytest.raises(TlsPlaintextListenerError) as info:
            call()
        took = time.monotonic() - start
        err = info.value
        assert isinstance(err, AuthenticationError) and not err.retriable
        assert f"TLS handshake with {bootstrap} failed: it is a plaintext Kafka listener" \
            in str(err), str(err)
        assert "set security.protocol to PLAINTEXT" in str(err)
        assert took < 5, f"took {took:.1f}s"


def test_tls_to_a_silent_listener_that_is_not_kafka_times_out() -> None:
    """A port that takes the ClientHello and never answers, nor answers the plaintext probe,
    is not shown to be plaintext Kafka: the handshake times out as before (retriable)."""
    server = socket.create_server(("127.0.0.1", 0))
    port = server.getsockname()[1]
    stop = threading.Event()
    held: list[socket.socket] = []

    def hold() -> None:
        server.settimeout(0.1)
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except TimeoutError:
                continue
            held.append(conn)

    thread = threading.Thread(target=hold, daemon=True)
    thread.start()
    try:
        err = _tls_failure(f"127.0.0.1:{port}", socket_connection_setup_timeout_ms=2500,
                           request_timeout_ms=3000)
    finally:
        stop.set()
        thread.join(5)
        for c in held:
            c.close()
        server.close()
    assert f"no TLS session with 127.0.0.1:{port} within 2.5s" in str(err), str(err)
    assert len(held) >= 2  # the handshake's connection and the probe's


def test_tls_to_a_plaintext_listener_that_hangs_up_says_so() -> None:
    """A Kafka plaintext listener reads a ClientHello as an oversized request and closes the
    connection; a socket that does just that stands in for it (neither test broker does)."""
    server = socket.create_server(("127.0.0.1", 0))
    port = server.getsockname()[1]
    stop = threading.Event()

    def hang_up() -> None:
        server.settimeout(0.1)
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except TimeoutError:
                continue
            with conn:
                conn.settimeout(2)
                conn.recv(5)  # the TLS record header: 0x16 0x03 ...

    thread = threading.Thread(target=hang_up, daemon=True)
    thread.start()
    try:
        err = _tls_failure(f"127.0.0.1:{port}")
    finally:
        stop.set()
        thread.join(5)
        server.close()
    message = str(err)
    assert f"TLS handshake with 127.0.0.1:{port} failed: the broker closed the connection" \
        in message, message
    assert "set security.protocol to PLAINTEXT" in message


def test_untrusted_certificate_message_names_the_check(tls_broker: tuple[str, TlsTerminator],
                                                       certs: Path) -> None:
    """A refused certificate is fatal: raised from the first attempt (it was retried for
    request.timeout.ms and surfaced as NoBrokersAvailableError)."""
    bootstrap, _term = tls_broker

    async def main() -> TlsCertificateError:
        client = AsyncKafkaClient(bootstrap_servers=bootstrap, security_protocol="SSL",
                                  ssl_ca_location=str(certs / "other.pem"))
        try:
            with pytest.raises(TlsCertificateError) as info:
                await client.start()
            return info.value
        finally:
            await client.close()

    start = time.monotonic()
    err = asyncio.run(main())
    assert time.monotonic() - start < 5.0  # generous; the retry loop took 30 s
    assert isinstance(err, AuthenticationError) and not err.retriable
    assert f"TLS handshake with {bootstrap} failed: the broker's certificate was refused" \
        in str(err)
    assert "ssl.ca.location" in str(err)


@pytest.fixture(scope="module")
def encrypted_key(certs: Path) -> tuple[Path, Path]:
    """A client certificate whose key is encrypted with the password 'right-password'."""
    openssl("req", "-x509", "-newkey", "rsa:2048", "-keyout", "client.key", "-out",
            "client.pem", "-days", "2", "-subj", "/CN=client", "-passout",
            "pass:right-password", cwd=certs)
    return certs / "client.pem", certs / "client.key"


def test_wrong_key_password_says_so_and_hides_it(encrypted_key: tuple[Path, Path]) -> None:
    cert, key = encrypted_key
    with pytest.raises(ConfigError) as info:
        AsyncKafkaClient(bootstrap_servers="127.0.0.1:1", security_protocol="SSL",
                         ssl_certificate_location=str(cert), ssl_key_location=str(key),
                         ssl_key_password="wrong-password-1234")
    assert str(info.value) == (f"ssl.key.password does not decrypt the private key in "
                               f"ssl.key.location={str(key)!r} (wrong password?)")
    assert "PEM lib" not in str(info.value)
    with pytest.raises(ConfigError, match=r"is encrypted: set ssl\.key\.password"):
        AsyncKafkaClient(bootstrap_servers="127.0.0.1:1", security_protocol="SSL",
                         ssl_certificate_location=str(cert), ssl_key_location=str(key))
    # The right password works: the failures above were about the password.
    AsyncKafkaClient(bootstrap_servers="127.0.0.1:1", security_protocol="SSL",
                     ssl_certificate_location=str(cert), ssl_key_location=str(key),
                     ssl_key_password="right-password")


def test_key_of_another_certificate_is_named(encrypted_key: tuple[Path, Path],
                                             certs: Path) -> None:
    cert, _key = encrypted_key
    with pytest.raises(ConfigError) as info:
        AsyncKafkaClient(bootstrap_servers="127.0.0.1:1", security_protocol="SSL",
                         ssl_certificate_location=str(cert),
                         ssl_key_location=str(certs / "server.key"))
    assert "does not belong to the certificate" in str(info.value)


def test_registry_client_says_the_same_about_a_wrong_key_password(
        encrypted_key: tuple[Path, Path]) -> None:
    from kontrakt.registry import SchemaRegistryClient

    cert, key = encrypted_key
    with pytest.raises(ConfigError) as info:
        SchemaRegistryClient({"url": "https://127.0.0.1:1", "ssl.certificate.location": str(cert),
                              "ssl.key.location": str(key), "ssl.key.password": "wrong-pw-99"})
    assert str(info.value).startswith("ssl.key.password does not decrypt the private key")
    assert "wrong-pw-99" not in str(info.value)
