"""KRaft cluster operations — a base class of :class:`~kontrakt.clients.admin.AsyncAdminClient`
with the Java admin client's ``describeMetadataQuorum`` (DescribeQuorum, KIP-595; the fetch
times of v1 are KIP-836, the directory ids and voter listeners of v2 KIP-853),
``unregisterBroker`` (UnregisterBroker, KIP-500), and ``addRaftVoter`` /
``removeRaftVoter`` (AddRaftVoter / RemoveRaftVoter, KIP-853).

All go to the least loaded broker, which forwards them to the active controller. The
quorum is Raft's, over the single partition ``__cluster_metadata-0``.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from kontrakt.clients.admin._routing import Router, error_for
from kontrakt.clients.client import AsyncKafkaClient
from kontrakt.errors import InvalidArgumentError, ProtocolError
from kontrakt.protocol.errors import RequestTimedOutError
from kontrakt.protocol.messages import (
    AddRaftVoterRequest,
    DescribeQuorumRequest,
    RemoveRaftVoterRequest,
    UnregisterBrokerRequest,
)

__all__ = ["QuorumInfo", "QuorumNode", "QuorumOperations", "QuorumReplicaState",
           "RaftVoterEndpoint"]

#: The topic and partition of the KRaft metadata log.
METADATA_TOPIC, METADATA_PARTITION = "__cluster_metadata", 0

_ZERO_UUID = uuid.UUID(int=0)


@dataclass(frozen=True, slots=True)
class QuorumReplicaState:
    """A voter or observer of the metadata quorum, as the leader last saw it.

    Attributes:
        replica_id: the node id.
        replica_directory_id: the replica's log directory id (KIP-853, DescribeQuorum v2);
            None from older brokers or when the replica has none.
        log_end_offset: -1 when unknown.
        last_fetch_timestamp: leader wall-clock ms of the replica's last fetch (v1+); None
            for the leader itself, when unknown, or from a v0 broker.
        last_caught_up_timestamp: leader wall-clock ms when the replica last caught up to
            the leader's log end (v1+); None when unknown or from a v0 broker.
    """

    replica_id: int
    replica_directory_id: uuid.UUID | None
    log_end_offset: int
    last_fetch_timestamp: int | None
    last_caught_up_timestamp: int | None


@dataclass(frozen=True, slots=True)
class RaftVoterEndpoint:
    """A listener of a quorum voter (KIP-853)."""

    name: str
    host: str
    port: int


@dataclass(frozen=True, slots=True)
class QuorumNode:
    """A quorum voter with its listeners (DescribeQuorum v2+)."""

    node_id: int
    endpoints: tuple[RaftVoterEndpoint, ...]


@dataclass(frozen=True, slots=True)
class QuorumInfo:
    """The state of the KRaft metadata quorum.

    Attributes:
        leader_id: the active controller; -1 when unknown.
        leader_epoch: the leader's epoch.
        high_watermark: the metadata log's high watermark.
        voters: the voters, as the leader reports them.
        observers: brokers (and controllers not voting) that replicate the log.
        nodes: node id -> its listeners, for the voters (DescribeQuorum v2+; empty from
            older brokers).
    """

    leader_id: int
    leader_epoch: int
    high_watermark: int
    voters: tuple[QuorumReplicaState, ...]
    observers: tuple[QuorumReplicaState, ...]
    nodes: dict[int, QuorumNode]


class QuorumOperations:
    """The metadata quorum and broker registrations (see the module doc)."""

    _client: AsyncKafkaClient
    _router: Router

    async def describe_metadata_quorum(self, *, timeout: float | None = None) -> QuorumInfo:
        """Describe the KRaft metadata quorum: its leader, epoch, high watermark, voters and
        observers (Java's ``Admin.describeMetadataQuorum``).

        Sent to the least loaded broker, which forwards it to the active controller.

        Args:
            timeout: seconds for the whole call, retries included (default
                ``default.api.timeout.ms``).

        Returns:
            :class:`QuorumInfo`.

        Raises:
            UnsupportedVersionError: the broker does not offer DescribeQuorum (a ZooKeeper
                cluster, or Kafka before 3.3).
            ClusterAuthorizationError: no DESCRIBE permission on the cluster.
            ProtocolError: the answer is not about ``__cluster_metadata-0``.
            KafkaTimeoutError: retriable errors (e.g. NOT_LEADER_OR_FOLLOWER while the
                quorum elects a leader) persisted until ``timeout``; the last one is
                raised when it says more.
        """
        deadline = self._router.deadline(timeout)
        await self._client.start()
        req = DescribeQuorumRequest

        def build(version: int) -> Any:
            return req(topics=[req.TopicData(topic_name=METADATA_TOPIC, partitions=[
                req.TopicData.PartitionData(partition_index=METADATA_PARTITION)])])

        async def attempt() -> QuorumInfo:
            resp = await self._router.exchange(self._client.least_loaded_node(), req, build,
                                               deadline)
            if resp.error_code:
                raise error_for(resp.error_code, resp.error_message, "describe_metadata_quorum")
            parts = [(t.topic_name, p) for t in resp.topics for p in t.partitions]
            if len(parts) != 1 or parts[0][0] != METADATA_TOPIC or \
                    parts[0][1].partition_index != METADATA_PARTITION:
                raise ProtocolError(
                    "DescribeQuorum answered about "
                    f"{[f'{t}-{p.partition_index}' for t, p in parts]}, not "
                    f"{METADATA_TOPIC}-{METADATA_PARTITION}")
            p = parts[0][1]
            if p.error_code:
                raise error_for(p.error_code, p.error_message,
                                f"{METADATA_TOPIC}-{METADATA_PARTITION}")
            return QuorumInfo(
                p.leader_id, p.leader_epoch, p.high_watermark,
                tuple(_replica(r) for r in p.current_voters),
                tuple(_replica(r) for r in p.observers),
                {n.node_id: QuorumNode(n.node_id, tuple(
                    RaftVoterEndpoint(e.name, e.host, e.port) for e in n.listeners))
                 for n in resp.nodes})

        return await self._router.call(attempt, deadline)

    async def unregister_broker(self, broker_id: int, *, timeout: float | None = None) -> None:
        """Remove a broker's registration from a KRaft cluster (Java's
        ``Admin.unregisterBroker``, KIP-500), e.g. after retiring it for good. Partition
        assignments are not changed: move the broker's replicas away first.

        Sent to the least loaded broker, which forwards it to the active controller.

        Args:
            broker_id: the broker to unregister.
            timeout: seconds for the whole call, retries included (default
                ``default.api.timeout.ms``); a request without an answer and
                REQUEST_TIMED_OUT (while forwarding) are retried until then, as in Java.

        Raises:
            InvalidArgumentError: ``broker_id`` is not an int >= 0 (nothing is sent).
            BrokerIdNotRegisteredError: the broker is not registered.
            UnsupportedVersionError: the broker does not offer UnregisterBroker (a
                ZooKeeper cluster, or Kafka before 3.0).
            ClusterAuthorizationFailedError: no ALTER permission on the cluster.
            Any other error the controller answers, with its message (not retried).
        """
        if isinstance(broker_id, bool) or not isinstance(broker_id, int) or \
                not 0 <= broker_id <= 2**31 - 1:
            raise InvalidArgumentError(f"broker_id must be an int >= 0, got {broker_id!r}")
        deadline = self._router.deadline(timeout)
        await self._client.start()
        req = UnregisterBrokerRequest

        async def attempt() -> BaseException | None:
            resp = await self._router.exchange(self._client.least_loaded_node(), req,
                                               lambda ver: req(broker_id=broker_id), deadline)
            if not resp.error_code:
                return None
            err = error_for(resp.error_code, resp.error_message,
                            f"unregister broker {broker_id}")
            # As Java's: only a forwarding timeout is asked again; any other answer is
            # the controller's word (retrying could not change it).
            if isinstance(err, RequestTimedOutError):
                raise err
            return err

        err = await self._router.call(attempt, deadline)
        if err is not None:
            raise err

    async def add_raft_voter(self, voter_id: int, voter_directory_id: uuid.UUID,
                             endpoints: Iterable[RaftVoterEndpoint], *,
                             cluster_id: str | None = None,
                             timeout: float | None = None) -> None:
        """Add a controller to the KRaft voter set (Java's ``Admin.addRaftVoter``,
        KIP-853; needs ``kraft.version`` 1). The controller must already be running as an
        observer that has caught up with the metadata log.

        Args:
            voter_id: the controller's node id.
            voter_directory_id: the directory id of its metadata log directory (see
                :meth:`describe_metadata_quorum`'s observers).
            endpoints: its controller listeners.
            cluster_id: when given, the controller refuses the change on another cluster
                (INCONSISTENT_CLUSTER_ID).
            timeout: seconds for the whole call (default ``default.api.timeout.ms``); also
                how long the controller may take to commit the new voter set.

        Raises:
            InvalidArgumentError: a bad id, directory id or endpoint, or no endpoint
                (nothing is sent).
            UnsupportedVersionError: the broker does not offer AddRaftVoter (before
                Kafka 3.9).
            DuplicateVoterError, InvalidRequestError, UnsupportedVersionError (a static
                quorum), ...: what the controller answered, with its message. As in Java,
                an answer is final: changing the voter set is not retried, only the
                sending of a request that got no answer.
        """
        _check_voter(voter_id, voter_directory_id)
        listeners = list(endpoints)
        if not listeners:
            raise InvalidArgumentError("add_raft_voter needs at least one endpoint")
        for e in listeners:
            _check_endpoint(e)
        deadline = self._router.deadline(timeout)
        await self._client.start()
        req = AddRaftVoterRequest

        def build(version: int) -> Any:
            return req(cluster_id=cluster_id, voter_id=voter_id,
                       timeout_ms=int(self._router.remaining(deadline) * 1000),
                       voter_directory_id=voter_directory_id,
                       listeners=[req.Listener(name=e.name, host=e.host, port=e.port)
                                  for e in listeners])

        await self._voter_change(req, build, f"add_raft_voter {voter_id}", deadline)

    async def remove_raft_voter(self, voter_id: int, voter_directory_id: uuid.UUID, *,
                                cluster_id: str | None = None,
                                timeout: float | None = None) -> None:
        """Remove a controller from the KRaft voter set (Java's
        ``Admin.removeRaftVoter``, KIP-853; needs ``kraft.version`` 1).

        Args:
            voter_id: the controller's node id.
            voter_directory_id: the directory id of its metadata log directory (see
                :meth:`describe_metadata_quorum`'s voters).
            cluster_id: when given, the controller refuses the change on another cluster.
            timeout: seconds for the whole call (default ``default.api.timeout.ms``).

        Raises:
            InvalidArgumentError: a bad id or directory id (nothing is sent).
            UnsupportedVersionError: the broker does not offer RemoveRaftVoter (before
                Kafka 3.9).
            VoterNotFoundError, ...: what the controller answered, with its message; final,
                as for :meth:`add_raft_voter`.
        """
        _check_voter(voter_id, voter_directory_id)
        deadline = self._router.deadline(timeout)
        await self._client.start()
        req = RemoveRaftVoterRequest
        await self._voter_change(req, lambda ver: req(
            cluster_id=cluster_id, voter_id=voter_id, voter_directory_id=voter_directory_id),
            f"remove_raft_voter {voter_id}", deadline)

    async def _voter_change(self, req: Any, build: Any, what: str, deadline: float) -> None:
        # Only a request without an answer is sent again (Router.call retries transport
        # failures); an error code is raised as it is, retriable or not, as Java's admin
        # client does: the voter set may have changed meanwhile.
        resp = await self._router.call(lambda: self._router.exchange(
            self._client.least_loaded_node(), req, build, deadline), deadline)
        if resp.error_code:
            raise error_for(resp.error_code, resp.error_message, what)


def _check_voter(voter_id: object, directory: object) -> None:
    if isinstance(voter_id, bool) or not isinstance(voter_id, int) or \
            not 0 <= voter_id <= 2**31 - 1:
        raise InvalidArgumentError(f"voter_id must be an int >= 0, got {voter_id!r}")
    if not isinstance(directory, uuid.UUID) or directory == _ZERO_UUID:
        raise InvalidArgumentError(
            f"voter_directory_id must be a non-zero uuid.UUID, got {directory!r}")


def _check_endpoint(e: object) -> None:
    if not isinstance(e, RaftVoterEndpoint) or not isinstance(e.name, str) or not e.name \
            or not isinstance(e.host, str) or not e.host or isinstance(e.port, bool) \
            or not isinstance(e.port, int) or not 0 <= e.port <= 65535:
        raise InvalidArgumentError(
            f"expected a RaftVoterEndpoint with a name, a host and a port, got {e!r}")


def _replica(r: Any) -> QuorumReplicaState:
    directory = r.replica_directory_id
    return QuorumReplicaState(
        r.replica_id, None if directory == _ZERO_UUID else directory, r.log_end_offset,
        None if r.last_fetch_timestamp < 0 else r.last_fetch_timestamp,
        None if r.last_caught_up_timestamp < 0 else r.last_caught_up_timestamp)
