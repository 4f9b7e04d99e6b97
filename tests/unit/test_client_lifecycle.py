"""Client constructors and close() with no broker to talk to (issue 20, items 6 and 8).

No broker is needed: "nothing listens" is a port just released (connection refused), and
"a broker that is gone without a word" is a socket that listens but never accepts (the
kernel completes the TCP handshake; no request is ever answered).
"""

from __future__ import annotations

import asyncio
import gc
import socket
import threading
import time
import warnings
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from kontrakt.clients import AsyncKafkaClient, KafkaClient
from kontrakt.clients.admin import AdminClient, AsyncAdminClient
from kontrakt.clients.consumer import AsyncConsumer, Consumer
from kontrakt.clients.producer import AsyncProducer, Producer
from kontrakt.errors import IllegalStateError, KafkaError, NoBrokersAvailableError
from kontrakt.protocol.messages import MetadataRequest

SLACK = 1.0


def _refused_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port: int = s.getsockname()[1]
    s.close()
    return port


@pytest.fixture
def silent() -> Iterator[str]:
    """host:port of a socket that listens and never answers."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(16)
    try:
        yield f"127.0.0.1:{s.getsockname()[1]}"
    finally:
        s.close()


def _timed(fn: Callable[[], Any]) -> tuple[Any, float]:
    start = time.monotonic()
    out = fn()
    return out, time.monotonic() - start


def test_producer_constructor_returns_at_once_and_send_fails_within_max_block() -> None:
    a, b = _refused_port(), _refused_port()
    p, took = _timed(lambda: Producer(bootstrap_servers=f"127.0.0.1:{a},127.0.0.1:{b}",
                                      max_block_ms=1500, reconnect_backoff_ms=10))
    try:
        assert took < 1.0, f"Producer() blocked {took:.2f}s with nothing listening"
        start = time.monotonic()
        with pytest.raises(NoBrokersAvailableError) as info:
            p.send("t", b"v")
        assert time.monotonic() - start < 1.5 + SLACK
        msg = str(info.value)
        assert "max.block.ms=1500" in msg
        assert f"127.0.0.1:{a} (connection refused)" in msg
        assert f"127.0.0.1:{b} (connection refused)" in msg
        # A failed start is tried again by the next call, bounded the same way.
        start = time.monotonic()
        with pytest.raises(NoBrokersAvailableError, match="connection refused"):
            p.flush()
        assert time.monotonic() - start < 1.5 + SLACK
    finally:
        _, took = _timed(lambda: p.close(timeout=1))
    assert took < 1 + SLACK


def test_admin_and_raw_client_constructors_return_at_once() -> None:
    port = _refused_port()
    for cls in (AdminClient, KafkaClient):
        c, took = _timed(lambda cls=cls: cls(bootstrap_servers=f"127.0.0.1:{port}",
                                             request_timeout_ms=1000))
        try:
            assert took < 1.0, f"{cls.__name__}() blocked {took:.2f}s"
            start = time.monotonic()
            with pytest.raises(NoBrokersAvailableError,
                               match=rf"request\.timeout\.ms=1000: 127\.0\.0\.1:{port} "
                                     r"\(connection refused\)"):
                if isinstance(c, AdminClient):
                    c.list_topics()
                else:
                    c.request(MetadataRequest(topics=[]))
            assert time.monotonic() - start < 1 + SLACK
        finally:
            c.close(timeout=1)


def test_consumer_subscribe_and_poll_return_within_their_timeout_with_no_broker() -> None:
    """Nothing listening: subscribe() returns at once (it used to block request.timeout.ms
    connecting), poll(0.2) returns None within its own timeout while the start goes on, and
    once the start has failed a poll raises its error, naming the broker; the next start is
    bounded the same way."""
    port = _refused_port()
    c, took = _timed(lambda: Consumer(bootstrap_servers=f"127.0.0.1:{port}", group_id="g",
                                      request_timeout_ms=1500, reconnect_backoff_ms=10))
    try:
        assert took < 1.0, f"Consumer() blocked {took:.2f}s"
        _, took = _timed(lambda: c.subscribe(["t"]))
        assert took < 1.0, f"subscribe() blocked {took:.2f}s with nothing listening"
        _, took = _timed(lambda: c.poll(0.2))
        assert took < 0.2 + SLACK
        start = time.monotonic()
        with pytest.raises(NoBrokersAvailableError,
                           match=rf"127\.0\.0\.1:{port} \(connection refused\)"):
            for _ in range(100):  # bounded: the start gives up after 1.5 s
                assert c.getmany(0.2) == {}
        assert time.monotonic() - start < 1.5 + SLACK
        start = time.monotonic()
        with pytest.raises(NoBrokersAvailableError):
            c.poll(None)
        assert time.monotonic() - start < 1.5 + SLACK
    finally:
        _, took = _timed(lambda: c.close(timeout=1))
    assert took < 1 + SLACK


def test_producer_close_with_timeout_is_bounded_when_the_broker_never_answers(
        silent: str) -> None:
    p = Producer(bootstrap_servers=silent, max_block_ms=20_000)
    errors: list[BaseException] = []

    def send() -> None:
        try:
            p.send("t", b"v")
        except BaseException as exc:
            errors.append(exc)

    sender = threading.Thread(target=send)
    sender.start()
    try:
        assert p._starting.pending  # the handshake hangs
        _, took = _timed(lambda: p.close(timeout=1))
        # Twice the slack: failed once at 1 + SLACK on a loaded 2-core machine; what is
        # tested is a close bounded by its timeout, not by max.block.ms (20 s).
        assert took < 1 + 2 * SLACK, f"close(timeout=1) took {took:.2f}s"
        sender.join(5)
        assert not sender.is_alive(), "the blocked send did not end with the close"
        assert len(errors) == 1 and isinstance(errors[0], (IllegalStateError, KafkaError))
    finally:
        sender.join(5)


def test_raw_client_close_with_timeout_is_bounded_during_a_request(silent: str) -> None:
    client = KafkaClient(bootstrap_servers=silent, request_timeout_ms=20_000)
    errors: list[BaseException] = []

    def ask() -> None:
        try:
            client.request(MetadataRequest(topics=[]))
        except BaseException as exc:
            errors.append(exc)

    asker = threading.Thread(target=ask)
    asker.start()
    try:
        deadline = time.monotonic() + 5
        while not client._async._nodes and time.monotonic() < deadline:
            time.sleep(0.01)  # until the request is connecting
        assert client._async._nodes
        _, took = _timed(lambda: client.close(timeout=1))
        assert took < 1 + SLACK, f"close(timeout=1) took {took:.2f}s"
        asker.join(2)
        assert not asker.is_alive() and len(errors) == 1
    finally:
        asker.join(5)


@pytest.mark.parametrize("cls", [Producer, Consumer, AdminClient, KafkaClient])
def test_dropped_sync_client_ends_its_loop_thread(cls: Any) -> None:
    """Nothing the loop thread runs keeps the client alive, and its finalizer ends the
    thread (here with the first connection still being retried)."""
    gc.collect()
    before = set(threading.enumerate())
    kwargs = {"group_id": "g"} if cls is Consumer else {}
    c = cls(bootstrap_servers=f"127.0.0.1:{_refused_port()}", **kwargs)
    assert set(threading.enumerate()) - before
    del c
    deadline = time.monotonic() + 10
    while set(threading.enumerate()) - before and time.monotonic() < deadline:
        gc.collect()
        time.sleep(0.02)
    assert not set(threading.enumerate()) - before, "the loop thread outlived its client"


@pytest.mark.parametrize(
    "cls", [AsyncKafkaClient, AsyncAdminClient, AsyncProducer, AsyncConsumer])
def test_async_client_dropped_unclosed_warns(cls: Any) -> None:
    """A started async client that is never closed is reported as asyncio reports an unclosed
    transport: a ResourceWarning naming the client, once the loop it ran on is gone. (The
    crafted start below marks it started; what matters is what its collection says.)"""

    async def main() -> None:
        c = cls(bootstrap_servers="127.0.0.1:1")
        inner = c if isinstance(c, AsyncKafkaClient) else c._client
        inner._started = True
        # A closed one says nothing.
        d = cls(bootstrap_servers="127.0.0.1:1")
        await d.close()

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        asyncio.run(main())
        gc.collect()
    messages = [str(w.message) for w in caught if issubclass(w.category, ResourceWarning)]
    assert len(messages) == 1, messages
    assert messages[0].startswith(f"unclosed {cls.__name__} "), messages
