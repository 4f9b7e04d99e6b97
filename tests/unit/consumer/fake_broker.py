"""A tiny single-broker Kafka peer on 127.0.0.1 for crafted-response consumer tests.

Neither test broker reports aborted transactions or answers timestamp lookups faithfully
(see TEST-BROKERS.md), so those paths are tested against this peer: it answers ApiVersions
and Metadata itself (one broker, leader of every partition of the topics it was given) and
hands Fetch / ListOffsets / OffsetForLeaderEpoch requests to per-test handlers.
"""

from __future__ import annotations

import asyncio
import struct
import uuid
from collections.abc import Callable
from typing import Any

from kontrakt.protocol.headers import decode_request, encode_response
from kontrakt.protocol.messages import ApiVersionsResponse, MetadataResponse

Handler = Callable[[int, Any], Any]

_VERSIONS = {18: (0, 3), 3: (0, 12), 1: (4, 12), 2: (1, 7), 23: (2, 4)}


class FakeBroker:
    """Answers ApiVersions and Metadata; other requests go to ``handlers[api_key]``.

    Args:
        topics: topic name -> partition count.
        handlers: api key -> ``handler(version, request) -> response``.
        leader_epoch: the leader epoch Metadata reports.
        versions: api key -> (lowest, highest) version to advertise besides the defaults
            (ApiVersions, Metadata, Fetch, ListOffsets, OffsetForLeaderEpoch).
    """

    def __init__(self, topics: dict[str, int], handlers: dict[int, Handler],
                 leader_epoch: int = 0,
                 versions: dict[int, tuple[int, int]] | None = None) -> None:
        self.versions = {**_VERSIONS, **(versions or {})}
        self.topics = topics
        self.handlers = handlers
        self.leader_epoch = leader_epoch
        self.requests: list[tuple[int, int, Any]] = []
        self.server: asyncio.base_events.Server | None = None
        self.port = 0
        self.topic_ids = {t: uuid.uuid4() for t in topics}

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    async def __aenter__(self) -> FakeBroker:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self.server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self.server is not None
        self.server.close()
        await self.server.wait_closed()

    def _metadata(self) -> Any:
        B = MetadataResponse.MetadataResponseBroker
        T = MetadataResponse.MetadataResponseTopic
        P = T.MetadataResponsePartition
        return MetadataResponse(
            brokers=[B(node_id=1, host="127.0.0.1", port=self.port)], controller_id=1,
            cluster_id="fake", topics=[
                T(error_code=0, name=t, topic_id=self.topic_ids[t], partitions=[
                    P(error_code=0, partition_index=i, leader_id=1,
                      leader_epoch=self.leader_epoch, replica_nodes=[1], isr_nodes=[1])
                    for i in range(n)])
                for t, n in self.topics.items()])

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                (size,) = struct.unpack(">i", await reader.readexactly(4))
                header, msg = decode_request(await reader.readexactly(size))
                key, ver, corr = header.api_key, header.api_version, header.correlation_id
                if key == 18:
                    resp: Any = ApiVersionsResponse(api_keys=[
                        ApiVersionsResponse.ApiVersion(api_key=k, min_version=lo,
                                                       max_version=hi)
                        for k, (lo, hi) in self.versions.items()])
                    writer.write(encode_response(resp, ver, corr))
                    await writer.drain()
                    continue
                self.requests.append((key, ver, msg))
                if key == 3:
                    resp = self._metadata()
                else:
                    resp = self.handlers[key](ver, msg)
                    if asyncio.iscoroutine(resp):
                        resp = await resp
                writer.write(encode_response(resp, ver, corr))
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    def fetches(self) -> list[Any]:
        """The Fetch requests received so far."""
        return [m for k, _v, m in self.requests if k == 1]
