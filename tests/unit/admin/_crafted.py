"""A crafted single-broker Kafka peer for admin tests.

Neither test broker implements these APIs faithfully (see TEST-BROKERS.md), so the admin logic
for them is tested against responses written here from Kafka's message specifications: the
peer answers ApiVersions (with the API keys a test chooses), Metadata (itself as node 1 and
controller) and FindCoordinator (itself), and hands every other request to a handler that
returns a response message, an error code for UNSUPPORTED_VERSION-style answers, or None to
drop the connection.
"""

from __future__ import annotations

import asyncio
import struct
from collections.abc import Callable
from typing import Any

from kontrakt.protocol.headers import decode_request, encode_response
from kontrakt.protocol.messages import (
    ApiVersionsResponse,
    FindCoordinatorResponse,
    MetadataResponse,
)
from kontrakt.protocol.spec import Request, Response, registry

Handler = Callable[[int, Request], Response | None]

NODE_ID = 1


class CraftedBroker:
    """Answers ApiVersions/Metadata/FindCoordinator itself and the rest with ``handlers``.

    Attributes:
        seen: (api_key, version, request) of every request handed to a handler.
        topics: topic name -> partition count, reported by Metadata.
    """

    def __init__(self, handlers: dict[int, Handler], *, topics: dict[str, int] | None = None,
                 offered: set[int] | None = None,
                 max_versions: dict[int, int] | None = None) -> None:
        self.max_versions = max_versions or {}
        self.handlers = handlers
        self.topics = topics or {}
        self.offered = set(offered if offered is not None else handlers) | {3, 10, 18}
        self.seen: list[tuple[int, int, Any]] = []
        self.server: asyncio.base_events.Server | None = None
        self.port = 0

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    async def __aenter__(self) -> CraftedBroker:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self.server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self.server is not None
        self.server.close()
        await self.server.wait_closed()

    def _versions(self) -> Response:
        specs = registry()
        keys = []
        for key in sorted(self.offered):
            spec = specs[key]
            hi = self.max_versions.get(key, spec.valid.hi)
            keys.append(ApiVersionsResponse.ApiVersion(
                api_key=key, min_version=spec.valid.lo, max_version=hi))
        return ApiVersionsResponse(api_keys=keys)

    def _metadata(self, req: Any) -> Response:
        mr = MetadataResponse
        names = list(self.topics) if req.topics is None else [t.name for t in req.topics]
        topics = []
        for name in names:
            n = self.topics.get(name)
            if n is None:
                topics.append(mr.MetadataResponseTopic(error_code=3, name=name))
                continue
            topics.append(mr.MetadataResponseTopic(name=name, partitions=[
                mr.MetadataResponseTopic.MetadataResponsePartition(
                    partition_index=i, leader_id=NODE_ID, leader_epoch=0,
                    replica_nodes=[NODE_ID], isr_nodes=[NODE_ID]) for i in range(n)]))
        return mr(brokers=[mr.MetadataResponseBroker(node_id=NODE_ID, host="127.0.0.1",
                                                     port=self.port)],
                  cluster_id="crafted", controller_id=NODE_ID, topics=topics)

    def _coordinator(self, req: Any, version: int) -> Response:
        fr = FindCoordinatorResponse
        if version >= 4:
            return fr(coordinators=[fr.Coordinator(key=k, node_id=NODE_ID, host="127.0.0.1",
                                                   port=self.port)
                                    for k in req.coordinator_keys])
        return fr(node_id=NODE_ID, host="127.0.0.1", port=self.port)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                (size,) = struct.unpack(">i", await reader.readexactly(4))
                header, msg = decode_request(await reader.readexactly(size))
                key, ver = header.api_key, header.api_version
                resp: Response | None
                if key == 18:
                    resp = self._versions()
                elif key == 3:
                    resp = self._metadata(msg)
                elif key == 10:
                    resp = self._coordinator(msg, ver)
                else:
                    self.seen.append((key, ver, msg))
                    resp = self.handlers[key](ver, msg)
                if resp is None:
                    break
                writer.write(encode_response(resp, ver, header.correlation_id))
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()
