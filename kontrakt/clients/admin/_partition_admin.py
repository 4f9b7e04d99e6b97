"""Partition leadership, replica reassignment and cluster features — a base class of
:class:`~kontrakt.clients.admin.AsyncAdminClient`, with the Java admin client's names
(``electLeaders``, ``alterPartitionReassignments``, ``listPartitionReassignments``,
``describeFeatures``, ``updateFeatures``) and the paginated DescribeTopicPartitions (KIP-966):
``describe_topic_partitions`` page by page, and ``describe_topics`` on brokers offering it.

Elections and reassignments go to the controller (brokers forward them in KRaft); feature
descriptions come from ApiVersions v3+ of the least loaded broker; feature updates go to the
least loaded broker, which forwards them.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kontrakt._types import TopicPartition
from kontrakt.clients.admin import _validate as v
from kontrakt.clients.admin._routing import Fatal, Router, error_for, finish
from kontrakt.clients.admin._types import PartitionDescription, TopicDescription
from kontrakt.clients.client import AsyncKafkaClient
from kontrakt.clients.group._protocol import group_by_topic
from kontrakt.errors import InvalidArgumentError, KafkaError, ProtocolError
from kontrakt.protocol.errors import (
    ElectionNotNeededError,
    LeaderNotAvailableError,
    NotControllerError,
    UnknownTopicOrPartitionError,
)
from kontrakt.protocol.messages import (
    AlterPartitionReassignmentsRequest,
    ApiVersionsRequest,
    DescribeTopicPartitionsRequest,
    ElectLeadersRequest,
    ListPartitionReassignmentsRequest,
    UpdateFeaturesRequest,
)
from kontrakt.protocol.spec import Request

__all__ = [
    "ElectionType",
    "FeatureMetadata",
    "FeatureUpdate",
    "FeatureUpgradeType",
    "FinalizedVersionRange",
    "PartitionAdminOperations",
    "PartitionReassignment",
    "SupportedVersionRange",
    "TopicPartitionsPage",
]

_ELECTION_NOT_NEEDED = ElectionNotNeededError.code


class ElectionType(enum.IntEnum):
    """Which replica :meth:`~PartitionAdminOperations.elect_leaders` makes leader."""

    #: the first replica of the assignment, if it is in sync (any broker)
    PREFERRED = 0
    #: a live replica even out of sync, when no in-sync one is left (ElectLeaders v1+)
    UNCLEAN = 1


class FeatureUpgradeType(enum.IntEnum):
    """How :meth:`~PartitionAdminOperations.update_features` may move a feature level."""

    UPGRADE = 1
    SAFE_DOWNGRADE = 2
    UNSAFE_DOWNGRADE = 3


@dataclass(frozen=True, slots=True)
class TopicPartitionsPage:
    """A page of :meth:`~PartitionAdminOperations.describe_topic_partitions`.

    Attributes:
        topics: topic name -> its description, holding the partitions on this page (a
            page may end inside a topic), or (``return_exceptions=True``) its error.
        next_cursor: where the next page starts (pass it as ``cursor``); None after the
            last page.
    """

    topics: dict[str, TopicDescription | BaseException]
    next_cursor: TopicPartition | None


@dataclass(frozen=True, slots=True)
class PartitionReassignment:
    """An ongoing reassignment: the current replica set, and the replicas being added to and
    removed from it."""

    replicas: tuple[int, ...]
    adding_replicas: tuple[int, ...]
    removing_replicas: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class FeatureUpdate:
    """A new finalized level for a feature; a level < 1 deletes the feature (a downgrade)."""

    max_version_level: int
    upgrade_type: FeatureUpgradeType = FeatureUpgradeType.UPGRADE


@dataclass(frozen=True, slots=True)
class FinalizedVersionRange:
    """The cluster-wide level of a feature."""

    min_version_level: int
    max_version_level: int


@dataclass(frozen=True, slots=True)
class SupportedVersionRange:
    """The levels of a feature a broker can run."""

    min_version: int
    max_version: int


@dataclass(frozen=True, slots=True)
class FeatureMetadata:
    """Features as one broker sees them: the finalized levels (with their epoch; None when
    the broker has no finalized features) and the ranges the broker supports."""

    finalized_features: dict[str, FinalizedVersionRange]
    finalized_features_epoch: int | None
    supported_features: dict[str, SupportedVersionRange]


def _check_controller_reply(code: int, message: str | None, what: str) -> None:
    """A top-level error fails the whole call; NOT_CONTROLLER is retried on fresh metadata."""
    if code:
        raise error_for(code, message, what)


class PartitionAdminOperations:
    """Leader elections, reassignments, features (see the module doc)."""

    _client: AsyncKafkaClient
    _router: Router

    async def _to_controller(self, request_type: type[Request], build: Any,
                             deadline: float) -> Any:
        try:
            return await self._router.to_controller(request_type, build, deadline)
        except NotControllerError as exc:
            self._router.controller_moved(exc)
            raise

    # --- elections --------------------------------------------------------------------

    async def elect_leaders(
            self, election_type: ElectionType,
            partitions: Iterable[TopicPartition] | None = None, *,
            timeout: float | None = None,
            return_exceptions: bool = False) -> dict[TopicPartition, None]:
        """Elect leaders of partitions (ElectLeaders, KIP-460).

        Args:
            election_type: :attr:`ElectionType.PREFERRED` or :attr:`ElectionType.UNCLEAN`
                (the latter needs brokers with ElectLeaders v1+).
            partitions: the partitions; None: every partition of the cluster, and then the
                partitions that needed no election are left out of the result.

        Returns:
            partition -> None for each partition whose leader was elected.

        Raises:
            InvalidArgumentError: not an ElectionType, or not TopicPartition values; nothing
                is sent.
            UnsupportedVersionError: UNCLEAN on a broker with ElectLeaders v0 only.
            BrokerResponseError: the only partition's error (ElectionNotNeededError when its
                leader is already the one asked for, PreferredLeaderNotAvailableError,
                EligibleLeadersNotAvailableError, UnknownTopicOrPartitionError) or the
                request's (ClusterAuthorizationFailedError); several partitions:
                PartialFailureError (or the errors in the dict with ``return_exceptions``).
            KafkaTimeoutError: no answer within ``timeout`` (seconds; default
                ``default.api.timeout.ms``), retries included.
        """
        if not isinstance(election_type, ElectionType):
            raise InvalidArgumentError(f"expected an ElectionType, got {election_type!r}")
        tps = None if partitions is None else v.check_partitions(partitions, "elect_leaders")
        req = ElectLeadersRequest
        wanted = None if tps is None else [
            req.TopicPartitions(topic=t, partitions=ps) for t, ps in group_by_topic(tps).items()]
        deadline = self._router.deadline(timeout)
        await self._client.start()

        async def attempt() -> dict[TopicPartition, Any]:
            resp = await self._to_controller(req, lambda ver: req(
                election_type=int(election_type), topic_partitions=wanted,
                timeout_ms=_ms(self._router.remaining(deadline))), deadline)
            _check_controller_reply(resp.error_code, None, "elect_leaders")
            out: dict[TopicPartition, Any] = {}
            for t in resp.replica_election_results:
                for p in t.partition_result:
                    if tps is None and p.error_code == _ELECTION_NOT_NEEDED:
                        continue
                    tp = TopicPartition(t.topic, p.partition_id)
                    out[tp] = error_for(p.error_code, p.error_message, str(tp)) \
                        if p.error_code else None
            missing = [tp for tp in tps or () if tp not in out]
            if missing:
                raise ProtocolError(f"elect_leaders: no result for {missing}")
            return out

        # An election asked twice ends the same (the second one is "not needed"): an attempt
        # without an answer is repeated.
        results = await self._router.call(attempt, deadline)
        return finish(results, "elect_leaders", return_exceptions)

    # --- reassignments ----------------------------------------------------------------

    async def alter_partition_reassignments(
            self, reassignments: Mapping[TopicPartition, Sequence[int] | None], *,
            allow_replication_factor_change: bool = True, timeout: float | None = None,
            return_exceptions: bool = False) -> dict[TopicPartition, None]:
        """Move partitions to new replica sets, or cancel their pending moves (KIP-455).

        Args:
            reassignments: partition -> target broker ids (the first is the preferred
                leader), or None to cancel the partition's ongoing reassignment.
            allow_replication_factor_change: False makes the broker refuse a target of
                another size than the current replica set (needs brokers with v1, KIP-860).

        Returns:
            partition -> None for each partition whose reassignment was accepted (it may
            still be in progress: see :meth:`list_partition_reassignments`).

        Raises:
            InvalidArgumentError: a key not a TopicPartition, or a target that is empty or
                repeats a broker; nothing is sent.
            UnsupportedVersionError: ``allow_replication_factor_change=False`` on a broker
                with v0 only.
            BrokerResponseError: the only partition's error (InvalidReplicaAssignmentError,
                NoReassignmentInProgressError on a cancel, UnknownTopicOrPartitionError,
                InvalidReplicationFactorError) or the request's; several partitions:
                PartialFailureError (or the errors in the dict with ``return_exceptions``).
            KafkaTimeoutError: no answer within ``timeout``.
        """
        items = dict(reassignments)
        v.check_partitions(items, "alter_partition_reassignments")
        for tp, target in items.items():
            if target is not None:
                v.check_assignment(tp.topic, [target])
        req = AlterPartitionReassignmentsRequest
        topics = [req.ReassignableTopic(name=t, partitions=[
            req.ReassignableTopic.ReassignablePartition(
                partition_index=p, replicas=None if items[TopicPartition(t, p)] is None
                else list(items[TopicPartition(t, p)] or ()))
            for p in ps]) for t, ps in group_by_topic(items).items()]
        deadline = self._router.deadline(timeout)
        await self._client.start()

        async def attempt() -> dict[TopicPartition, Any]:
            resp = await self._to_controller(req, lambda ver: req(
                timeout_ms=_ms(self._router.remaining(deadline)), topics=topics,
                allow_replication_factor_change=allow_replication_factor_change), deadline)
            _check_controller_reply(resp.error_code, resp.error_message,
                                    "alter_partition_reassignments")
            out: dict[TopicPartition, Any] = {}
            for t in resp.responses:
                for p in t.partitions:
                    tp = TopicPartition(t.name, p.partition_index)
                    out[tp] = error_for(p.error_code, p.error_message, str(tp)) \
                        if p.error_code else None
            missing = [tp for tp in items if tp not in out]
            if missing:
                raise ProtocolError(f"alter_partition_reassignments: no result for {missing}")
            return out

        results = await self._router.call(attempt, deadline)
        return finish(results, "alter_partition_reassignments", return_exceptions)

    async def list_partition_reassignments(
            self, partitions: Iterable[TopicPartition] | None = None, *,
            timeout: float | None = None) -> dict[TopicPartition, PartitionReassignment]:
        """The ongoing reassignments (KIP-455).

        Args:
            partitions: only these partitions; None: every ongoing reassignment.

        Returns:
            partition -> :class:`PartitionReassignment`, only for partitions being moved.

        Raises:
            InvalidArgumentError: not TopicPartition values; nothing is sent.
            BrokerResponseError: the broker's top-level error (e.g.
                ClusterAuthorizationFailedError).
            KafkaTimeoutError: no answer within ``timeout``.
        """
        tps = None if partitions is None else v.check_partitions(partitions,
                                                          "list_partition_reassignments")
        req = ListPartitionReassignmentsRequest
        topics = None if tps is None else [
            req.ListPartitionReassignmentsTopics(name=t, partition_indexes=ps)
            for t, ps in group_by_topic(tps).items()]
        deadline = self._router.deadline(timeout)
        await self._client.start()

        async def attempt() -> dict[TopicPartition, PartitionReassignment]:
            resp = await self._to_controller(req, lambda ver: req(
                timeout_ms=_ms(self._router.remaining(deadline)), topics=topics), deadline)
            _check_controller_reply(resp.error_code, resp.error_message,
                                    "list_partition_reassignments")
            return {TopicPartition(t.name, p.partition_index): PartitionReassignment(
                        tuple(p.replicas), tuple(p.adding_replicas), tuple(p.removing_replicas))
                    for t in resp.topics for p in t.partitions}

        return await self._router.call(attempt, deadline)

    # --- features ---------------------------------------------------------------------

    async def describe_features(self, *, timeout: float | None = None) -> FeatureMetadata:
        """The finalized and supported features of the least loaded broker (KIP-584; from
        ApiVersions v3+: a broker answering an older version reports no features).

        Raises:
            KafkaTimeoutError / KafkaConnectionError: no broker answered in ``timeout``.
        """
        deadline = self._router.deadline(timeout)
        await self._client.start()

        async def attempt() -> FeatureMetadata:
            resp = await self._router.exchange(
                self._client.least_loaded_node(), ApiVersionsRequest,
                lambda ver: ApiVersionsRequest(client_software_name="kontrakt",
                                               client_software_version="0"), deadline)
            if resp.error_code:
                raise error_for(resp.error_code, None, "describe_features")
            epoch = resp.finalized_features_epoch
            return FeatureMetadata(
                {f.name: FinalizedVersionRange(f.min_version_level, f.max_version_level)
                 for f in resp.finalized_features},
                epoch if epoch >= 0 else None,
                {f.name: SupportedVersionRange(f.min_version, f.max_version)
                 for f in resp.supported_features})

        return await self._router.call(attempt, deadline)

    async def update_features(
            self, updates: Mapping[str, FeatureUpdate], *, validate_only: bool = False,
            timeout: float | None = None,
            return_exceptions: bool = False) -> dict[str, None]:
        """Change finalized feature levels (UpdateFeatures, KIP-584 / KIP-778).

        Args:
            updates: feature name -> :class:`FeatureUpdate`.
            validate_only: have the controller check the updates without applying them
                (brokers with v1+; v0 brokers refuse it with UnsupportedVersionError).

        Returns:
            feature -> None for each feature updated.

        Raises:
            InvalidArgumentError: an empty name, not a FeatureUpdate, or an UPGRADE to a
                level < 1; nothing is sent.
            BrokerResponseError: the only feature's error (InvalidUpdateVersionError for a
                level the brokers do not support or a downgrade without a downgrade type);
                several: PartialFailureError. A v2 broker answers with one error for the
                whole request, which becomes every feature's.
            KafkaTimeoutError: no answer within ``timeout``.
        """
        items = dict(updates)
        if not items:
            raise InvalidArgumentError("update_features: no updates given")
        for name, u in items.items():
            if not isinstance(name, str) or not name:
                raise InvalidArgumentError(f"feature names are non-empty str, got {name!r}")
            if not isinstance(u, FeatureUpdate) or not isinstance(u.upgrade_type,
                                                                   FeatureUpgradeType):
                raise InvalidArgumentError(f"feature {name!r}: expected FeatureUpdate, got {u!r}")
            if u.upgrade_type is FeatureUpgradeType.UPGRADE and u.max_version_level < 1:
                raise InvalidArgumentError(
                    f"feature {name!r}: deleting it (level < 1) is a downgrade")
        req = UpdateFeaturesRequest
        deadline = self._router.deadline(timeout)
        await self._client.start()

        def build(ver: int) -> Request:
            return req(timeout_ms=_ms(self._router.remaining(deadline)),
                       validate_only=validate_only,
                       feature_updates=[req.FeatureUpdateKey(
                           feature=n, max_version_level=u.max_version_level,
                           # v0's flag; v1+ carry the upgrade type instead
                           allow_downgrade=ver == 0
                           and u.upgrade_type is not FeatureUpgradeType.UPGRADE,
                           upgrade_type=int(u.upgrade_type)) for n, u in items.items()])

        async def attempt() -> dict[str, Any]:
            resp = await self._router.exchange(self._client.least_loaded_node(), req, build,
                                               deadline)
            if resp.error_code:
                err = error_for(resp.error_code, resp.error_message, "update_features")
                if isinstance(err, KafkaError) and err.retriable:
                    raise err
                return {n: err for n in items}
            out: dict[str, Any] = {n: None for n in items}
            for r in resp.results:
                out[r.feature] = error_for(r.error_code, r.error_message,
                                           f"feature {r.feature!r}") if r.error_code else None
            return out

        results = await self._router.call(attempt, deadline)
        return finish(results, "update_features", return_exceptions)

    # --- DescribeTopicPartitions (KIP-966) ----------------------------------------------

    async def describe_topic_partitions(
            self, topics: Iterable[str] | None, *, response_partition_limit: int = 2000,
            cursor: TopicPartition | None = None, all_pages: bool = False,
            timeout: float | None = None, return_exceptions: bool = False
            ) -> TopicPartitionsPage:
        """One page of topics' partitions (DescribeTopicPartitions, KIP-966; brokers of
        Kafka 3.8+), or every page with ``all_pages``: each partition's leader and epoch,
        replicas, in-sync replicas, eligible leader replicas (ELR), last known ELR and
        offline replicas. The least loaded broker answers from its metadata.

        A page holds at most ``response_partition_limit`` partitions and may end inside a
        topic; ask for the next with ``cursor=page.next_cursor``. Topics come in name
        order, partitions in partition order.

        Args:
            topics: the topics (None: every topic the broker lets this client see).
            response_partition_limit: at most this many partitions per page (1 or more;
                the broker may lower it).
            cursor: where the page starts: a topic among ``topics`` and its first partition
                to include (from a previous page's ``next_cursor``); None: the beginning.
            all_pages: follow the cursor until the last page and return everything
                (``next_cursor`` None); a topic still being created is then asked again
                until the timeout, as in :meth:`describe_topics`.
            timeout: seconds for the whole call (default: the client's
                ``default.api.timeout.ms``); a request without an answer is sent again
                until then.

        Returns:
            a :class:`TopicPartitionsPage`: topic name -> :class:`TopicDescription` (its
            partitions on this page) and the next page's cursor (None after the last).

        Raises:
            InvalidArgumentError: a bad topic name, limit or cursor (before sending).
            UnsupportedVersionError: the broker does not offer DescribeTopicPartitions.
            PartialFailureError: some topics failed (``UnknownTopicOrPartitionError`` for
                a topic that does not exist); ``.results`` maps every topic of the page to
                its description or error. With one topic, its own error.
                ``return_exceptions=True`` puts the errors in ``topics`` instead.
            ProtocolError: the broker's cursor did not move forward.
        """
        names = None if topics is None else v.unique(
            (v.check_topic_name(t) for t in topics), "topic")
        if isinstance(response_partition_limit, bool) or not isinstance(
                response_partition_limit, int) or not 1 <= response_partition_limit < 2**31:
            raise InvalidArgumentError("response_partition_limit must be an int >= 1, got "
                                       f"{response_partition_limit!r}")
        if cursor is not None:
            if not isinstance(cursor, TopicPartition):
                raise InvalidArgumentError(f"cursor must be a TopicPartition, got {cursor!r}")
            v.check_topic_name(cursor.topic)
            v.check_partition(cursor.topic, cursor.partition)
            if names is not None and cursor.topic not in names:
                # Kafka refuses a cursor outside the topics (INVALID_REQUEST).
                raise InvalidArgumentError(
                    f"cursor topic {cursor.topic!r} is not one of the topics")
        deadline = self._router.deadline(timeout)
        await self._client.start()

        if all_pages:
            async def round_(batch: list[str]) -> dict[str, Any]:
                found, _ = await self._topic_partition_pages(
                    self._client.least_loaded_node(), batch, deadline,
                    response_partition_limit, cursor, follow=True)
                return found

            if names is None:  # every topic: no per-topic retry (the set is the broker's)
                found, _ = await self._router.call(lambda: self._topic_partition_pages(
                    self._client.least_loaded_node(), None, deadline,
                    response_partition_limit, cursor, follow=True), deadline)
                results = {n: r.error if isinstance(r, Fatal) else r for n, r in found.items()}
            else:
                results = await self._router.per_entity(names, round_, deadline)
            return TopicPartitionsPage(
                finish(results, "describe_topic_partitions", return_exceptions), None)

        found, nxt = await self._router.call(lambda: self._topic_partition_pages(
            self._client.least_loaded_node(), names, deadline, response_partition_limit,
            cursor, follow=False), deadline)
        results = {n: r.error if isinstance(r, Fatal) else r for n, r in found.items()}
        return TopicPartitionsPage(
            finish(results, "describe_topic_partitions", return_exceptions), nxt)

    async def _describe_topic_partitions(self, node: int, names: list[str],
                                         deadline: float) -> dict[str, Any]:
        """One round of ``describe_topics`` over DescribeTopicPartitions: every page."""
        found, _ = await self._topic_partition_pages(node, names, deadline, 2000, None,
                                                     follow=True)
        return found

    async def _topic_partition_pages(
            self, node: int, names: list[str] | None, deadline: float, limit: int,
            cursor: TopicPartition | None, *, follow: bool
            ) -> tuple[dict[str, Any], TopicPartition | None]:
        """DescribeTopicPartitions pages from ``cursor`` on: one, or (``follow``) until the
        broker's cursor runs out. Returns topic -> TopicDescription or error (an unknown
        topic wrapped in :class:`Fatal`), and the next page's cursor."""
        req = DescribeTopicPartitionsRequest
        topics = [] if names is None else [req.TopicRequest(name=n) for n in names]
        found: dict[str, Any] = {}
        parts: dict[str, list[PartitionDescription]] = {}
        at = None if cursor is None else req.Cursor(topic_name=cursor.topic,
                                                    partition_index=cursor.partition)
        # Each page moves the cursor past at least one partition: the number of pages is
        # bounded by the number of partitions; the deadline bounds it in time.
        while True:
            resp = await self._router.exchange(node, req, _fixed(req(
                topics=topics, response_partition_limit=limit, cursor=at)), deadline)
            for t in resp.topics:
                if t.error_code:
                    err = error_for(t.error_code, None, f"topic {t.name!r}")
                    found[t.name] = Fatal(err) if isinstance(err, UnknownTopicOrPartitionError) \
                        else err
                    continue
                found.setdefault(t.name, (t.topic_id, t.is_internal))
                parts.setdefault(t.name, []).extend(PartitionDescription(
                    p.partition_index, p.leader_id, p.leader_epoch, tuple(p.replica_nodes),
                    tuple(p.isr_nodes), tuple(p.offline_replicas),
                    _opt(p.eligible_leader_replicas), _opt(p.last_known_elr))
                    for p in t.partitions)
            nxt = resp.next_cursor
            if nxt is not None and at is not None and (
                    nxt.topic_name, nxt.partition_index) <= (at.topic_name, at.partition_index):
                raise ProtocolError(f"DescribeTopicPartitions: cursor did not advance "
                                    f"({nxt.topic_name}, {nxt.partition_index})")
            if nxt is None or not follow:
                break
            at = req.Cursor(topic_name=nxt.topic_name, partition_index=nxt.partition_index)
        nxt_tp = None if nxt is None else TopicPartition(nxt.topic_name, nxt.partition_index)
        out: dict[str, Any] = {}
        for name, value in found.items():
            if not isinstance(value, tuple):
                out[name] = value
                continue
            ps = tuple(sorted(parts.get(name, []), key=lambda p: p.partition))
            if not ps and nxt_tp is not None and name == nxt_tp.topic:
                continue  # the page ended before its partitions: they are on the next one
            out[name] = TopicDescription(name, value[0], value[1], ps) if ps else \
                LeaderNotAvailableError(f"topic {name!r} has no partitions yet")
        return out, nxt_tp


def _fixed(request: Request) -> Callable[[int], Request]:
    """A request builder for an API with a single version."""
    return lambda _version: request


def _opt(ids: list[int] | None) -> tuple[int, ...] | None:
    return None if ids is None else tuple(ids)


def _ms(seconds: float) -> int:
    return max(1, min(2**31 - 1, int(seconds * 1000)))
