"""Registry calls fail in bounded time against registries that refuse, stay silent or trickle.

Real sockets on 127.0.0.1 stand in for the wrong-port URLs of issue 20: a closed port (refused),
a listening socket that is never read (the request is accepted by the kernel, no answer ever
comes), a listener whose accept queue is full (the handshake itself never completes), and a
thread that answers one byte at a time. Retry rules per method are checked with respx.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
import respx

from kontrakt.errors import ConfigError
from kontrakt.registry import (
    AsyncSchemaRegistryClient,
    RegistryConnectionError,
    Schema,
    SchemaRegistryClient,
    SchemaRegistryError,
)

CT = {"Content-Type": "application/vnd.schemaregistry.v1+json"}
URL = "http://registry.test:8081"


def reply(status: int, body: Any) -> httpx.Response:
    return httpx.Response(status, content=json.dumps(body).encode(), headers=CT)


@contextlib.contextmanager
def closed_port() -> Iterator[int]:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    yield port


@contextlib.contextmanager
def silent_listener() -> Iterator[int]:
    """Connections complete (the kernel accepts them) but nothing is ever read or written."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(16)
    try:
        yield s.getsockname()[1]
    finally:
        s.close()


@contextlib.contextmanager
def full_listener() -> Iterator[int]:
    """A listener whose accept queue is full: further handshakes get no answer (Linux drops
    the SYN), so a client's connect hangs until its own timeout."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(0)
    port = s.getsockname()[1]
    fillers = []
    try:
        for _ in range(16):
            c = socket.socket()
            c.settimeout(0.2)
            fillers.append(c)
            try:
                c.connect(("127.0.0.1", port))
            except OSError:  # timed out: the queue is full
                break
        else:
            pytest.skip("the accept queue never filled up on this platform")
        yield port
    finally:
        for c in fillers:
            c.close()
        s.close()


@contextlib.contextmanager
def trickling_server(byte_every: float, total_bytes: int) -> Iterator[int]:
    """Answers 200 with a body sent one byte every ``byte_every`` seconds."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(4)
    s.settimeout(0.1)
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = s.accept()
            except OSError:
                continue
            with conn:
                conn.settimeout(1)
                with contextlib.suppress(OSError):
                    conn.recv(65536)
                    conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                                 b"Content-Length: %d\r\n\r\n" % total_bytes)
                    for _ in range(total_bytes):
                        if stop.wait(byte_every):
                            break
                        conn.sendall(b" ")
    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield s.getsockname()[1]
    finally:
        stop.set()
        thread.join(5)
        s.close()


def timed(fn: Any) -> tuple[BaseException, float]:
    start = time.monotonic()
    with pytest.raises(SchemaRegistryError) as info:
        fn()
    return info.value, time.monotonic() - start


def test_closed_port_fails_within_the_total_timeout() -> None:
    """Default retries (backoff up to 1 + 2 + 4 s) are cut short by total.timeout.ms."""
    with closed_port() as port:
        url = f"http://127.0.0.1:{port}"
        with SchemaRegistryClient({"url": url, "total.timeout.ms": 1500,
                                   "retries.wait.ms": 2000}) as c:
            err, took = timed(lambda: c.get_schema(1))
    assert isinstance(err, RegistryConnectionError)
    assert took < 2.5
    assert url in str(err) and "cannot connect" in str(err) and "refused" in str(err).lower()


def test_silent_registry_is_bounded_by_the_total_timeout() -> None:
    with silent_listener() as port:
        url = f"http://127.0.0.1:{port}"
        conf = {"url": url, "timeout": 0.3, "total.timeout.ms": 1200, "max.retries": 10,
                "retries.wait.ms": 10, "retries.max.wait.ms": 10}
        with SchemaRegistryClient(conf) as c:
            err, took = timed(lambda: c.get_subjects())
            sent = c.requests_sent
    assert isinstance(err, RegistryConnectionError)
    assert 1.1 < took < 2.0, took
    assert 3 <= sent <= 5
    # The last attempt gets what is left of the call's time.
    assert url in str(err) and re.search(r"no answer within 0\.[0-3]\d* s", str(err))
    assert "total.timeout.ms (1200) reached" in str(err)


def test_silent_registry_delete_is_not_retried() -> None:
    """A DELETE that may have been applied is not sent again (a repeat would answer "not
    found" and hide the first one); the error says so."""
    with silent_listener() as port:
        conf = {"url": f"http://127.0.0.1:{port}", "timeout": 0.3, "max.retries": 3,
                "retries.wait.ms": 10}
        with SchemaRegistryClient(conf) as c:
            err, took = timed(lambda: c.delete_subject("s"))
            assert c.requests_sent == 1
    assert isinstance(err, RegistryConnectionError) and "not retried" in str(err)
    assert took < 1.5


def test_connect_timeout_is_separate_from_the_read_timeout() -> None:
    with full_listener() as port:
        conf = {"url": f"http://127.0.0.1:{port}", "timeout": 30, "connect.timeout.ms": 300,
                "max.retries": 0}
        with SchemaRegistryClient(conf) as c:
            err, took = timed(lambda: c.get_subjects())
    assert isinstance(err, RegistryConnectionError)
    assert "no connection within 0.3 s" in str(err)
    assert took < 2.0


def test_trickling_answer_is_cut_at_the_total_timeout() -> None:
    """Every byte comes within the read timeout; the call still ends at total.timeout.ms."""
    with trickling_server(byte_every=0.1, total_bytes=60) as port:
        conf = {"url": f"http://127.0.0.1:{port}", "timeout": 2, "total.timeout.ms": 800,
                "max.retries": 0}
        with SchemaRegistryClient(conf) as c:
            err, took = timed(lambda: c.get_subjects())
    assert isinstance(err, RegistryConnectionError)
    assert took < 1.6, took


def test_async_client_is_bounded_the_same_way() -> None:
    async def main() -> None:
        with silent_listener() as port:
            conf = {"url": f"http://127.0.0.1:{port}", "timeout": 0.3,
                    "total.timeout.ms": 1000, "max.retries": 10, "retries.wait.ms": 10}
            async with AsyncSchemaRegistryClient(conf) as c:
                start = time.monotonic()
                with pytest.raises(RegistryConnectionError, match=r"total\.timeout\.ms"):
                    await c.get_subjects()
                assert time.monotonic() - start < 1.8
                before = c.requests_sent
                with pytest.raises(RegistryConnectionError, match="not retried"):
                    await c.delete_version("s", 1)
                assert c.requests_sent == before + 1
        with trickling_server(byte_every=0.1, total_bytes=60) as port:
            conf = {"url": f"http://127.0.0.1:{port}", "timeout": 2, "total.timeout.ms": 800,
                    "max.retries": 0}
            async with AsyncSchemaRegistryClient(conf) as c:
                start = time.monotonic()
                with pytest.raises(RegistryConnectionError):
                    await c.get_subjects()
                assert time.monotonic() - start < 1.6
    asyncio.run(main())


def fast(**extra: Any) -> dict[str, Any]:
    return {"url": URL, "max.retries": 2, "retries.wait.ms": 1, "retries.max.wait.ms": 2,
            **extra}


@respx.mock
def test_retry_rules_per_method() -> None:
    busy = reply(503, {"error_code": 50003, "message": "busy"})
    delete = respx.delete(f"{URL}/subjects/s").mock(return_value=busy)
    register = respx.post(f"{URL}/subjects/s/versions").mock(
        side_effect=[busy, busy, reply(200, {"id": 4})])
    read = respx.get(f"{URL}/subjects").mock(side_effect=[busy, reply(200, ["s"])])
    with SchemaRegistryClient(fast()) as c:
        with pytest.raises(SchemaRegistryError) as info:
            c.delete_subject("s")
        assert info.value.http_status_code == 503 and delete.call_count == 1
        # Registering is retried as confluent-kafka retries it: the registry answers a
        # repeated registration of the same schema with the same id.
        assert c.register_schema("s", Schema('"int"')) == 4 and register.call_count == 3
        assert c.get_subjects() == ["s"] and read.call_count == 2


@respx.mock
def test_unsent_delete_is_retried() -> None:
    route = respx.delete(f"{URL}/subjects/s").mock(side_effect=[
        httpx.ConnectError("refused"), httpx.ConnectTimeout("syn"), reply(200, [1])])
    with SchemaRegistryClient(fast()) as c:
        assert c.delete_subject("s") == [1]
    assert route.call_count == 3


@respx.mock
def test_each_attempt_carries_its_timeouts() -> None:
    route = respx.get(f"{URL}/subjects").mock(return_value=reply(200, []))
    with SchemaRegistryClient({"url": URL}) as c:
        c.get_subjects()
    sent = route.calls.last.request.extensions["timeout"]
    # Defaults: 10 s to connect, each read and write 30 s, cut to what total.timeout.ms
    # (30 s) has left.
    assert sent["connect"] == 10.0
    assert all(29.0 < sent[k] <= 30.0 for k in ("read", "write", "pool")), sent
    with SchemaRegistryClient({"url": URL, "timeout": 30, "connect.timeout.ms": 2500,
                               "total.timeout.ms": 5000}) as c:
        c.get_subjects()
    sent = route.calls.last.request.extensions["timeout"]
    assert sent["connect"] == 2.5 and 4.5 < sent["read"] <= 5.0


@respx.mock
def test_total_timeout_bounds_5xx_retries() -> None:
    route = respx.get(f"{URL}/subjects").mock(
        return_value=reply(500, {"error_code": 50001, "message": "store"}))
    conf = fast(**{"max.retries": 1000, "retries.wait.ms": 20, "retries.max.wait.ms": 20,
                   "total.timeout.ms": 300})
    with SchemaRegistryClient(conf) as c:
        err, took = timed(lambda: c.get_subjects())
    assert isinstance(err, SchemaRegistryError) and err.error_code == 50001
    assert 0.2 < took < 1.0 and 3 < route.call_count < 100


@respx.mock
def test_an_attempt_cut_short_by_the_deadline_keeps_the_registry_s_last_answer() -> None:
    """The last attempt before total.timeout.ms gets what time is left; when that runs out
    (here: any attempt given less than 0.1 s times out), the call reports the registry's
    last answer, not "no answer within a millisecond" (seen once in a CI run)."""
    def answer(request: httpx.Request) -> httpx.Response:
        if request.extensions["timeout"]["read"] < 0.1:
            raise httpx.ReadTimeout("cut short", request=request)
        return reply(500, {"error_code": 50001, "message": "store"})

    respx.get(f"{URL}/subjects").mock(side_effect=answer)
    conf = fast(**{"max.retries": 1000, "retries.wait.ms": 20, "retries.max.wait.ms": 20,
                   "total.timeout.ms": 300})
    with SchemaRegistryClient(conf) as c:
        err, _ = timed(lambda: c.get_subjects())
    assert isinstance(err, SchemaRegistryError) and err.error_code == 50001, err


def test_timeout_keys_are_validated() -> None:
    for key in ("connect.timeout.ms", "total.timeout.ms"):
        for bad in (0, -5, "soon", True):
            with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
                SchemaRegistryClient({"url": URL, key: bad})
