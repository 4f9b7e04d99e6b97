"""A single-broker Kafka peer on 127.0.0.1 that answers with responses a test crafts.

Neither test broker answers everything faithfully (see TEST-BROKERS.md: aborted transactions,
timestamp lookups, group error paths, most admin APIs), so those paths are tested against
this peer. It answers ApiVersions, Metadata (itself as node 1, controller and leader of
every partition) and FindCoordinator (itself) on its own, and hands every other request to
the test's handler for its API key, which returns the response message (or a coroutine
giving it), or None to drop the connection. A handler given for Metadata or
FindCoordinator replaces the built-in answer.

The consumer and group tests use :class:`FakeBroker`, the same peer advertising the fetch
path's API versions.
"""

from __future__ import annotations

import asyncio
import struct
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from kontrakt.protocol.headers import decode_request, encode_response
from kontrakt.protocol.messages import (
    ApiVersionsResponse,
    FindCoordinatorResponse,
    ListOffsetsResponse,
    MetadataResponse,
    OffsetCommitResponse,
    OffsetFetchResponse,
)
from kontrakt.protocol.spec import Request, Response, registry

__all__ = ["FETCH_VERSIONS", "NODE_ID", "CraftedBroker", "FakeBroker", "Handler"]

Handler = Callable[[int, Any], "Response | Awaitable[Response | None] | None"]

NODE_ID = 1
_API_VERSIONS, _METADATA, _FIND_COORDINATOR = 18, 3, 10
_UNKNOWN_TOPIC_OR_PARTITION = 3

#: API key -> (lowest, highest) version the consumer tests' peer advertises: ApiVersions,
#: Metadata, Fetch (v4+: the record batches these tests write), ListOffsets and
#: OffsetForLeaderEpoch.
FETCH_VERSIONS: dict[int, tuple[int, int]] = {
    18: (0, 3), 3: (0, 12), 1: (4, 12), 2: (1, 7), 23: (2, 4)}


class CraftedBroker:
    """Answers ApiVersions, Metadata and FindCoordinator itself and the rest with
    ``handlers``.

    Args:
        handlers: api key -> ``handler(version, request)`` returning the response (or an
            awaitable of it), or None to drop the connection.
        topics: topic name -> partition count, reported by Metadata: those asked for (one
            not here is UNKNOWN_TOPIC_OR_PARTITION), or all when none is named.
        versions: api key -> (lowest, highest) version to advertise. Keys with a handler and
            the built-in ones not listed here are advertised with every version the
            protocol spec knows.
        max_versions: api key -> highest version to advertise (an older broker), the lowest
            as the spec declares it.
        leader_epoch: the leader epoch Metadata reports for every partition.
        close_after_metadata: close each connection once it has answered a Metadata
            request (as a bootstrap load balancer that hands out one answer per connection).

    Attributes:
        requests: (api key, version, request) of every request but ApiVersions.
        seen: (api key, version, request) of every request handed to a handler.
        topic_ids: topic name -> the id Metadata reports.
    """

    def __init__(self, handlers: dict[int, Handler], *, topics: dict[str, int] | None = None,
                 versions: dict[int, tuple[int, int]] | None = None,
                 max_versions: dict[int, int] | None = None,
                 leader_epoch: int = 0, close_after_metadata: bool = False) -> None:
        self.handlers = handlers
        self.close_after_metadata = close_after_metadata
        self.topics = dict(topics or {})
        self.versions = dict(versions or {})
        specs = registry()
        for key, hi in (max_versions or {}).items():  # an older broker: lowest as declared
            self.versions[key] = (specs[key].valid.lo, hi)
        self.leader_epoch = leader_epoch
        self.requests: list[tuple[int, int, Any]] = []
        self.seen: list[tuple[int, int, Any]] = []
        self.topic_ids = {t: uuid.uuid4() for t in self.topics}
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

    def fetches(self) -> list[Any]:
        """The Fetch requests received so far."""
        return [m for k, _v, m in self.requests if k == 1]

    # --- built-in answers ----------------------------------------------------------------

    def _api_versions(self) -> Response:
        specs = registry()
        keys = {*self.handlers, *self.versions, _API_VERSIONS, _METADATA, _FIND_COORDINATOR}
        out = []
        for key in sorted(keys):
            given = self.versions.get(key)
            valid = specs[key].valid
            lo, hi = given if given is not None else (valid.lo, valid.hi)
            assert hi is not None, f"API key {key} has no highest version in the spec"
            out.append(ApiVersionsResponse.ApiVersion(api_key=key, min_version=lo,
                                                      max_version=hi))
        return ApiVersionsResponse(api_keys=out)

    def _metadata(self, req: Any) -> Response:
        mr = MetadataResponse
        t_ = mr.MetadataResponseTopic
        # An empty list too (Kafka: no topics): the consumer tests count on the bootstrap
        # answer naming every topic, which saves them a metadata round trip.
        names = [t.name for t in req.topics] if req.topics else list(self.topics)
        topics = []
        for name in names:
            n = self.topics.get(name)
            if n is None:
                topics.append(t_(error_code=_UNKNOWN_TOPIC_OR_PARTITION, name=name))
                continue
            topics.append(t_(error_code=0, name=name, topic_id=self.topic_ids[name],
                             partitions=[t_.MetadataResponsePartition(
                                 error_code=0, partition_index=i, leader_id=NODE_ID,
                                 leader_epoch=self.leader_epoch, replica_nodes=[NODE_ID],
                                 isr_nodes=[NODE_ID]) for i in range(n)]))
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

    # --- serving -------------------------------------------------------------------------

    async def _answer(self, key: int, version: int, msg: Request) -> Response | None:
        if key == _API_VERSIONS:
            return self._api_versions()
        self.requests.append((key, version, msg))
        handler = self.handlers.get(key)
        if handler is None and key == _METADATA:
            return self._metadata(msg)
        if handler is None and key == _FIND_COORDINATOR:
            return self._coordinator(msg, version)
        self.seen.append((key, version, msg))
        if handler is None:
            raise AssertionError(f"the crafted broker has no handler for API key {key}")
        resp = handler(version, msg)
        if isinstance(resp, Awaitable):
            resp = await resp
        return resp

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                (size,) = struct.unpack(">i", await reader.readexactly(4))
                header, msg = decode_request(await reader.readexactly(size))
                resp = await self._answer(header.api_key, header.api_version, msg)
                if resp is None:
                    break
                writer.write(encode_response(resp, header.api_version, header.correlation_id))
                await writer.drain()
                if self.close_after_metadata and header.api_key == _METADATA:
                    break
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()


class FakeBroker(CraftedBroker):
    """The consumer and group tests' peer: :class:`CraftedBroker` advertising
    :data:`FETCH_VERSIONS` (and ``versions`` besides).

    Args:
        topics: topic name -> partition count.
        handlers: api key -> ``handler(version, request) -> response``.
        leader_epoch: the leader epoch Metadata reports.
        versions: api key -> (lowest, highest) version to advertise besides the defaults.
    """

    def __init__(self, topics: dict[str, int], handlers: dict[int, Handler],
                 leader_epoch: int = 0,
                 versions: dict[int, tuple[int, int]] | None = None) -> None:
        super().__init__(handlers, topics=topics, leader_epoch=leader_epoch,
                         versions={**FETCH_VERSIONS, **(versions or {})})


class ServedOffsets:
    """OffsetCommit, OffsetFetch and ListOffsets answered as a group coordinator and as the
    leader of partitions holding ``records`` records each (offsets 0 to ``records`` - 1):
    commits are kept in ``committed`` (partition -> offset, which the subclass sets up) and
    read back; -2 (earliest) is 0, any other timestamp the end."""

    records = 0
    committed: dict[int, int]

    def commit(self, version: int, req: Any) -> Any:
        T = OffsetCommitResponse.OffsetCommitResponseTopic
        for t in req.topics:
            for p in t.partitions:
                self.committed[p.partition_index] = p.committed_offset
        return OffsetCommitResponse(topics=[T(name=t.name, partitions=[
            T.OffsetCommitResponsePartition(partition_index=p.partition_index, error_code=0)
            for p in t.partitions]) for t in req.topics])

    def offset_fetch(self, version: int, req: Any) -> Any:
        T = OffsetFetchResponse.OffsetFetchResponseTopic
        return OffsetFetchResponse(error_code=0, topics=[T(name=t.name, partitions=[
            T.OffsetFetchResponsePartition(partition_index=i, metadata="",
                                           committed_offset=self.committed.get(i, -1))
            for i in t.partition_indexes]) for t in req.topics])

    def list_offsets(self, version: int, req: Any) -> Any:
        T = ListOffsetsResponse.ListOffsetsTopicResponse
        return ListOffsetsResponse(topics=[T(name=t.name, partitions=[
            T.ListOffsetsPartitionResponse(partition_index=p.partition_index, error_code=0,
                                           offset=0 if p.timestamp == -2 else self.records,
                                           timestamp=-1)
            for p in t.partitions]) for t in req.topics])
