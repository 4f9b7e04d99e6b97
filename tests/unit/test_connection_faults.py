"""The connection layer against a misbehaving peer.

Neither test broker can be made to send garbage, oversized frames or wrong correlation ids,
so these tests run a crafted peer on 127.0.0.1 that answers ApiVersions correctly and then
misbehaves in one specific way. Every case must end in a typed error, never a hang.
"""

from __future__ import annotations

import asyncio
import random
import struct
from collections.abc import Awaitable, Callable

import pytest

from kontrakt.clients import AsyncKafkaClient, KafkaClient
from kontrakt.clients._net.connection import BrokerConnection, ConnectionSettings
from kontrakt.errors import (
    ConfigError,
    CorruptMessageError,
    IllegalStateError,
    KafkaConnectionError,
    KafkaTimeoutError,
    NoBrokersAvailableError,
    ProtocolError,
    UnsupportedVersionError,
)
from kontrakt.protocol.headers import decode_request, encode_response
from kontrakt.protocol.messages import (
    ApiVersionsResponse,
    MetadataRequest,
    MetadataResponse,
)

Behaviour = Callable[[int, int, int, asyncio.StreamWriter], Awaitable[None]]


def _api_versions(corr: int, version: int) -> bytes:
    keys = [ApiVersionsResponse.ApiVersion(api_key=18, min_version=0, max_version=4),
            ApiVersionsResponse.ApiVersion(api_key=3, min_version=0, max_version=12)]
    return encode_response(ApiVersionsResponse(api_keys=keys), version, corr)


class CraftedBroker:
    """Answers ApiVersions properly and hands every other request to ``behaviour``."""

    def __init__(self, behaviour: Behaviour) -> None:
        self.behaviour = behaviour
        self.server: asyncio.base_events.Server | None = None
        self.port = 0
        self.requests = 0

    async def __aenter__(self) -> CraftedBroker:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self.server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self.server is not None
        self.server.close()
        await self.server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                (size,) = struct.unpack(">i", await reader.readexactly(4))
                header, _msg = decode_request(await reader.readexactly(size))
                if header.api_key == 18:
                    writer.write(_api_versions(header.correlation_id, header.api_version))
                    await writer.drain()
                    continue
                self.requests += 1
                await self.behaviour(header.api_key, header.api_version,
                                     header.correlation_id, writer)
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()


def _settings(**kw: object) -> ConnectionSettings:
    base: dict[str, object] = {"request_timeout": 2.0, "connect_timeout": 2.0}
    base.update(kw)
    return ConnectionSettings(**base)  # type: ignore[arg-type]


async def _connect(port: int, **kw: object) -> BrokerConnection:
    conn = BrokerConnection("127.0.0.1", port, -1, _settings(**kw))
    await conn.connect()
    return conn


async def _run_case(behaviour: Behaviour, exc_type: type[BaseException], match: str = "",
                    **kw: object) -> None:
    async with CraftedBroker(behaviour) as broker:
        conn = await _connect(broker.port, **kw)
        try:
            assert conn.negotiate(MetadataRequest) == 12
            with pytest.raises(exc_type, match=match):
                await asyncio.wait_for(conn.send(MetadataRequest(topics=[])), 10)
            assert not conn.connected
        finally:
            await conn.close()


async def _garbage(api: int, ver: int, corr: int, w: asyncio.StreamWriter) -> None:
    w.write(struct.pack(">ii", 12, corr) + b"\xff" * 8)
    await w.drain()


async def _oversized(api: int, ver: int, corr: int, w: asyncio.StreamWriter) -> None:
    w.write(struct.pack(">i", 50_000_000))
    await w.drain()


async def _wrong_corr(api: int, ver: int, corr: int, w: asyncio.StreamWriter) -> None:
    w.write(encode_response(MetadataResponse(), ver, corr + 1000))
    await w.drain()


async def _truncated_then_close(api: int, ver: int, corr: int, w: asyncio.StreamWriter) -> None:
    frame = encode_response(MetadataResponse(), ver, corr)
    w.write(frame[: len(frame) // 2])
    await w.drain()
    w.close()


async def _silent(api: int, ver: int, corr: int, w: asyncio.StreamWriter) -> None:
    return None


async def _negative_size(api: int, ver: int, corr: int, w: asyncio.StreamWriter) -> None:
    w.write(struct.pack(">i", -5))
    await w.drain()


def test_garbage_body_is_a_corrupt_message_naming_the_broker() -> None:
    asyncio.run(_run_case(_garbage, CorruptMessageError, "from broker 127.0.0.1"))


def test_frame_larger_than_limit() -> None:
    asyncio.run(_run_case(_oversized, KafkaConnectionError, "receive.message.max.bytes",
                          max_frame_bytes=1_000_000))


def test_negative_frame_size() -> None:
    asyncio.run(_run_case(_negative_size, KafkaConnectionError, "frame of -5 bytes"))


def test_unknown_correlation_id() -> None:
    asyncio.run(_run_case(_wrong_corr, KafkaConnectionError, "unknown correlation id"))


def test_truncated_frame_then_close() -> None:
    asyncio.run(_run_case(_truncated_then_close, KafkaConnectionError, "closed by broker"))


def test_no_response_times_out_and_closes() -> None:
    asyncio.run(_run_case(_silent, KafkaTimeoutError, "no response", request_timeout=0.3))


def test_error_types() -> None:
    assert issubclass(KafkaTimeoutError, TimeoutError)
    assert issubclass(CorruptMessageError, ProtocolError)
    assert issubclass(ConfigError, ValueError)


def test_pipelined_requests_share_one_connection() -> None:
    async def answer_later(api: int, ver: int, corr: int, w: asyncio.StreamWriter) -> None:
        # Reply out of order relative to nothing else: each reply carries its own id.
        w.write(encode_response(MetadataResponse(controller_id=corr), ver, corr))
        await w.drain()

    async def main() -> None:
        async with CraftedBroker(answer_later) as broker:
            conn = await _connect(broker.port, max_in_flight=3)
            try:
                results = await asyncio.gather(
                    *(conn.send(MetadataRequest(topics=[])) for _ in range(20)))
                assert len({r.controller_id for r in results}) == 20
            finally:
                await conn.close()

    asyncio.run(main())


def test_send_nowait_callback_runs_once_where_the_future_resolves() -> None:
    # The producer's response path: the callback runs inside the connection's own handling
    # of the response (before the future's done-callbacks, which wait a loop turn), exactly
    # once, for answers and for failures alike; one that raises does not break the
    # connection.
    async def answer(api: int, ver: int, corr: int, w: asyncio.StreamWriter) -> None:
        w.write(encode_response(MetadataResponse(controller_id=corr), ver, corr))
        await w.drain()

    async def main() -> None:
        async with CraftedBroker(answer) as broker:
            conn = await _connect(broker.port)
            seen: list[tuple[str, object]] = []

            def callback(fut: asyncio.Future[object]) -> None:
                # Done-callbacks of the future have not run yet: the hook came first.
                seen.append(("callback", fut.result().controller_id))  # type: ignore[attr-defined]

            def raising(fut: asyncio.Future[object]) -> None:
                seen.append(("raising", None))
                raise RuntimeError("a bug in the caller")

            try:
                version = conn.negotiate(MetadataRequest)
                first = conn.send_nowait(MetadataRequest(topics=[]), version=version,
                                         callback=callback)
                assert first is not None
                first.add_done_callback(lambda f: seen.append(("done-callback", None)))
                await first
                await asyncio.sleep(0)
                assert [k for k, _ in seen] == ["callback", "done-callback"]
                assert seen[0][1] == first.result().controller_id
                second = conn.send_nowait(MetadataRequest(topics=[]), version=version,
                                          callback=raising)
                assert second is not None
                await second
                assert conn.connected and seen[-1] == ("raising", None)
                # A request the connection fails when it closes gets its callback too.
                failed: list[BaseException | None] = []
                async with CraftedBroker(_silent) as quiet:
                    conn2 = await _connect(quiet.port)
                    third = conn2.send_nowait(MetadataRequest(topics=[]), version=version,
                                              callback=lambda f: failed.append(f.exception()))
                    await conn2.close()
                    assert third is not None and third.done()
                assert len(failed) == 1 and isinstance(failed[0], KafkaConnectionError)
            finally:
                await conn.close()

    asyncio.run(main())


def test_frames_of_any_size_in_any_pieces() -> None:
    # The connection reads into a buffer of its own (64 KiB); a larger frame gets a buffer
    # of its size, dropped once empty when over 1 MiB. Responses here come in pieces of odd
    # sizes, several in one write, and larger than either limit, in turn.
    sizes = [10, 70_000, 10, 2_500_000, 300, 65_530, 65_536, 10, 1_200_000, 10]
    rng = random.Random(7)

    async def answer_all(api: int, ver: int, corr: int, w: asyncio.StreamWriter) -> None:
        # The requests' answers go out together once the last request is in, cut at
        # random points (drained between pieces so that the client reads them apart).
        pending.append(encode_response(
            MetadataResponse(controller_id=corr, cluster_id="c" * sizes[corr % len(sizes)]),
            ver, corr))
        if len(pending) < batch:
            return
        data = b"".join(pending)
        pending.clear()
        pos = 0
        while pos < len(data):
            step = rng.choice([1, 3, 4, 5, 4096, 65_535, 65_536, 100_000, 1 << 20])
            w.write(data[pos:pos + step])
            await w.drain()
            pos += step

    pending: list[bytes] = []
    batch = 1

    async def main() -> None:
        nonlocal batch
        async with CraftedBroker(answer_all) as broker:
            conn = await _connect(broker.port, max_in_flight=len(sizes))
            try:
                version = conn.negotiate(MetadataRequest)
                for _ in range(2):
                    got = [await conn.send(MetadataRequest(topics=[]), version=version)
                           for _ in sizes]
                    # (ten consecutive correlation ids: every size once)
                    assert sorted(r.controller_id % len(sizes) for r in got) == \
                        list(range(len(sizes)))
                    assert all(len(r.cluster_id) == sizes[r.controller_id % len(sizes)]
                               for r in got)
                    # (buffers grown past 1 MiB are gone)
                    assert conn._proto is not None and len(conn._proto._buf) <= 1 << 20
                batch = len(sizes)  # now all at once, pipelined
                got = await asyncio.gather(
                    *(conn.send(MetadataRequest(topics=[]), version=version) for _ in sizes))
                assert sorted(len(r.cluster_id) for r in got) == sorted(sizes)
                assert all(len(r.cluster_id) == sizes[r.controller_id % len(sizes)]
                           for r in got)
                assert conn.connected
            finally:
                await conn.close()

    asyncio.run(main())


def test_negotiation_picks_highest_common_version() -> None:
    async def main() -> None:
        async with CraftedBroker(_silent) as broker:
            conn = await _connect(broker.port)
            try:
                assert conn.api_versions[3] == (0, 12)
                assert conn.negotiate(MetadataRequest) == 12
                assert conn.negotiate(MetadataRequest, 4) == 4
                with pytest.raises(UnsupportedVersionError):
                    conn.negotiate(MetadataRequest, 13)
                from kontrakt.protocol.messages import ProduceRequest
                with pytest.raises(UnsupportedVersionError, match="does not support"):
                    conn.negotiate(ProduceRequest)
            finally:
                await conn.close()

    asyncio.run(main())


def test_refused_connection_is_typed() -> None:
    async def main() -> None:
        server = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        server.close()
        await server.wait_closed()
        with pytest.raises(KafkaConnectionError, match="cannot connect"):
            await _connect(port)

    asyncio.run(main())


def test_client_with_no_reachable_bootstrap_fails_in_time() -> None:
    async def main() -> None:
        server = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        server.close()
        await server.wait_closed()
        client = AsyncKafkaClient(bootstrap_servers=f"127.0.0.1:{port}",
                                  request_timeout_ms=500, reconnect_backoff_ms=10)
        with pytest.raises(NoBrokersAvailableError):
            await asyncio.wait_for(client.start(), 5)
        await client.close()

    asyncio.run(main())


def test_config_errors_name_close_matches() -> None:
    with pytest.raises(ConfigError, match=r"bootstrap\.servers"):
        AsyncKafkaClient({"bootstrap.server": "127.0.0.1:9092"})
    with pytest.raises(ConfigError, match="host:port"):
        AsyncKafkaClient(bootstrap_servers="nohost")
    with pytest.raises(ConfigError, match="integer"):
        AsyncKafkaClient(bootstrap_servers="127.0.0.1:1", request_timeout_ms="soon")
    c = AsyncKafkaClient(bootstrap_servers="127.0.0.1:1", sasl_password="hunter2",
                         security_protocol="SASL_PLAINTEXT", sasl_username="u")
    assert "hunter2" not in repr(c.config)


def test_sync_client_rejects_calls_from_its_own_loop() -> None:
    async def answer(api: int, ver: int, corr: int, w: asyncio.StreamWriter) -> None:
        w.write(encode_response(MetadataResponse(), ver, corr))
        await w.drain()

    import threading

    ready = threading.Event()
    stop = threading.Event()
    port_box: list[int] = []

    def serve() -> None:
        async def main() -> None:
            async with CraftedBroker(answer) as broker:
                port_box.append(broker.port)
                ready.set()
                while not stop.is_set():
                    await asyncio.sleep(0.02)

        asyncio.run(main())

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    assert ready.wait(5)
    try:
        with KafkaClient(bootstrap_servers=f"127.0.0.1:{port_box[0]}") as client:
            resp = client.request(MetadataRequest(topics=[]))
            assert resp.brokers == []

            async def inside() -> None:
                client.request(MetadataRequest(topics=[]))

            with pytest.raises(IllegalStateError, match="event-loop thread"):
                client._thread.run(inside())
        with pytest.raises(IllegalStateError):
            client.request(MetadataRequest(topics=[]))
    finally:
        stop.set()
        t.join(5)
