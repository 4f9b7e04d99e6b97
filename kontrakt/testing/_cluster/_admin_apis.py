"""Partition and feature administration: ElectLeaders (43), AlterPartitionReassignments (45),
ListPartitionReassignments (46), UpdateFeatures (57), DescribeTopicPartitions (75) and the
features ApiVersions v3+ reports.

Elections: the preferred leader is a partition's first replica; it is elected when its
broker is up (an in-sync replica here: every live replica is in sync). An unclean election
happens only for a partition whose leader is down, and makes the first live replica leader.

Reassignments follow KIP-455: while a partition moves, its replica set is the target followed
by the original replicas leaving it (``adding`` = target - original, ``removing`` = original
- target). A new replica catches up at once when its broker is up, so a move to live brokers
completes within the AlterPartitionReassignments request; a move with an adding replica on a
down broker stays ongoing until that broker is up again (checked by each request of this
module), or until it is cancelled (replicas None), which restores the original set. A leader
that leaves the replica set hands over to the first live replica of the new set.

Features: a finalized ``metadata.version``-like level and two other features, with Kafka's
upgrade/downgrade rules (KIP-584, KIP-778): UPGRADE must not lower a level, a downgrade type
must not raise one, levels stay within the supported range, ``metadata.version`` can be
neither deleted nor downgraded (as Kafka 4.0 refuses downgrades that may lose metadata), and
a request is applied whole or not at all.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

from kontrakt.protocol import errors as E
from kontrakt.protocol.messages import (
    AlterPartitionReassignmentsResponse,
    ApiVersionsResponse,
    DescribeTopicPartitionsResponse,
    ElectLeadersResponse,
    ListPartitionReassignmentsResponse,
    UpdateFeaturesResponse,
)
from kontrakt.protocol.spec import Response
from kontrakt.testing._cluster._state import ClusterState, RequestContext, Topic

__all__ = ["SUPPORTED_FEATURES", "PartitionAdmin"]

#: feature -> (lowest, highest supported level, level finalized at start)
SUPPORTED_FEATURES: Final[dict[str, tuple[int, int, int]]] = {
    "metadata.version": (7, 25, 25),
    "group.version": (0, 1, 1),
    "transaction.version": (0, 2, 2),
}
_METADATA_VERSION = "metadata.version"
_UPGRADE, _SAFE_DOWNGRADE, _UNSAFE_DOWNGRADE = 1, 2, 3
_PREFERRED, _UNCLEAN = 0, 1


@dataclass(slots=True)
class _Move:
    """An ongoing reassignment of one partition."""

    original: list[int]
    target: list[int]

    @property
    def adding(self) -> list[int]:
        return [r for r in self.target if r not in self.original]

    @property
    def removing(self) -> list[int]:
        return [r for r in self.original if r not in self.target]


class PartitionAdmin:
    """Handlers of the module doc's APIs, and the features ApiVersions reports."""

    def __init__(self, state: ClusterState) -> None:
        self.state = state
        self.moves: dict[tuple[str, int], _Move] = {}
        self.finalized = {name: level for name, (_lo, _hi, level) in SUPPORTED_FEATURES.items()
                          if level > 0}
        self.features_epoch = 1

    # --- leadership ---------------------------------------------------------------------------
    def _lead(self, topic: Topic, index: int, broker_id: int) -> None:
        topic.leaders[index] = broker_id
        topic.partitions[index].new_leader_epoch()

    def _elect(self, topic: Topic | None, index: int, election_type: int) -> tuple[int, str | None]:
        if topic is None or not 0 <= index < len(topic.partitions):
            return E.UnknownTopicOrPartitionError.code, "unknown topic or partition"
        up = self.state.brokers
        replicas, leader = topic.replicas[index], topic.leaders[index]
        if election_type == _PREFERRED:
            preferred = replicas[0]
            if leader == preferred and up[leader].up:
                return E.ElectionNotNeededError.code, "the preferred replica is the leader"
            if not up[preferred].up:
                return (E.PreferredLeaderNotAvailableError.code,
                        f"preferred replica {preferred} is not available")
            self._lead(topic, index, preferred)
            return 0, None
        if up[leader].up:
            return E.ElectionNotNeededError.code, "the partition has a live leader"
        live = [r for r in replicas if up[r].up]
        if not live:
            return E.EligibleLeadersNotAvailableError.code, "no replica is live"
        self._lead(topic, index, live[0])
        return 0, None

    def elect_leaders(self, ctx: RequestContext, version: int, req: Any) -> Response:
        self._progress()
        er = ElectLeadersResponse
        election_type = req.election_type if version >= 1 else _PREFERRED
        if election_type not in (_PREFERRED, _UNCLEAN):
            return er(error_code=E.InvalidRequestError.code)
        wanted: list[tuple[str, list[int]]]
        if req.topic_partitions is None:
            wanted = [(t.name, list(range(len(t.partitions))))
                      for t in self.state.topics.values()]
        else:
            wanted = [(tp.topic, list(tp.partitions)) for tp in req.topic_partitions]
        results = []
        for name, indexes in wanted:
            topic = self.state.topics.get(name)
            outcomes = []
            for i in indexes:
                code, message = self._elect(topic, i, election_type)
                outcomes.append(er.ReplicaElectionResult.PartitionResult(
                    partition_id=i, error_code=code, error_message=message))
            results.append(er.ReplicaElectionResult(topic=name, partition_result=outcomes))
        self.state.notify()
        return er(replica_election_results=results)

    # --- reassignments ------------------------------------------------------------------------
    def _progress(self) -> None:
        """Complete the moves whose new replicas are all live (they caught up)."""
        for key, move in list(self.moves.items()):
            if all(self.state.brokers[r].up for r in move.adding):
                self._finish(key, move.target)

    def _finish(self, key: tuple[str, int], replicas: list[int]) -> None:
        self.moves.pop(key, None)
        topic = self.state.topics.get(key[0])
        if topic is None:
            return
        topic.replicas[key[1]] = list(replicas)
        self._keep_leader_in(topic, key[1])

    def _keep_leader_in(self, topic: Topic, index: int) -> None:
        replicas = topic.replicas[index]
        if topic.leaders[index] in replicas:
            return
        live = [r for r in replicas if self.state.brokers[r].up]
        self._lead(topic, index, (live or replicas)[0])

    def _reassign(self, name: str, index: int, target: list[int] | None,
                  allow_rf_change: bool) -> tuple[int, str | None]:
        found = self.state.partition(name, index)
        if found is None:
            return E.UnknownTopicOrPartitionError.code, "unknown topic or partition"
        topic = found[0]
        key = (name, index)
        move = self.moves.get(key)
        if target is None:
            if move is None:
                return E.NoReassignmentInProgressError.code, "no reassignment in progress"
            self._finish(key, move.original)
            return 0, None
        if not target or len(set(target)) != len(target) or any(
                r not in self.state.brokers for r in target):
            return (E.InvalidReplicaAssignmentError.code,
                    f"replicas {target} must be distinct ids of existing brokers")
        original = move.original if move is not None else list(topic.replicas[index])
        if not allow_rf_change and len(target) != len(original):
            return (E.InvalidReplicationFactorError.code,
                    f"the replication factor would change from {len(original)} to "
                    f"{len(target)}")
        move = _Move(original, list(target))
        if not move.adding and not move.removing and target == original:
            self._finish(key, target)
            return 0, None
        self.moves[key] = move
        topic.replicas[index] = move.target + move.removing
        self._keep_leader_in(topic, index)
        return 0, None

    def alter_partition_reassignments(self, ctx: RequestContext, version: int,
                                      req: Any) -> Response:
        self._progress()
        ar = AlterPartitionReassignmentsResponse
        allow = req.allow_replication_factor_change if version >= 1 else True
        responses = []
        for t in req.topics:
            parts = []
            for p in t.partitions:
                code, message = self._reassign(t.name, p.partition_index, p.replicas, allow)
                parts.append(ar.ReassignableTopicResponse.ReassignablePartitionResponse(
                    partition_index=p.partition_index, error_code=code, error_message=message))
            responses.append(ar.ReassignableTopicResponse(name=t.name, partitions=parts))
        self._progress()
        self.state.notify()
        return ar(allow_replication_factor_change=allow, responses=responses)

    def list_partition_reassignments(self, ctx: RequestContext, version: int,
                                     req: Any) -> Response:
        self._progress()
        lr = ListPartitionReassignmentsResponse
        if req.topics is None:
            keys = sorted(self.moves)
        else:
            keys = [(t.name, i) for t in req.topics for i in t.partition_indexes
                    if (t.name, i) in self.moves]
        by_topic: dict[str, list[Any]] = {}
        for name, index in keys:
            move = self.moves[(name, index)]
            by_topic.setdefault(name, []).append(
                lr.OngoingTopicReassignment.OngoingPartitionReassignment(
                    partition_index=index, replicas=move.target + move.removing,
                    adding_replicas=move.adding, removing_replicas=move.removing))
        return lr(topics=[lr.OngoingTopicReassignment(name=n, partitions=ps)
                          for n, ps in by_topic.items()])

    # --- DescribeTopicPartitions (KIP-966) ----------------------------------------------------
    def describe_topic_partitions(self, ctx: RequestContext, version: int,
                                  req: Any) -> Response:
        """Topics in name order (every topic when none is named), starting at the cursor;
        a page ends after ``response_partition_limit`` partitions (at least one), and
        ``next_cursor`` says where the next one starts."""
        self._progress()
        dr = DescribeTopicPartitionsResponse
        st = self.state
        names = sorted({t.name for t in req.topics} if req.topics else set(st.topics))
        limit = max(1, req.response_partition_limit)
        cursor = req.cursor
        if cursor is not None:
            names = [n for n in names if n >= cursor.topic_name]
        topics: list[Any] = []
        next_cursor = None
        for name in names:
            topic = st.topics.get(name)
            if topic is None:
                topics.append(dr.DescribeTopicPartitionsResponseTopic(
                    error_code=E.UnknownTopicOrPartitionError.code, name=name))
                continue
            start = cursor.partition_index if cursor is not None and name == \
                cursor.topic_name else 0
            if limit == 0:
                next_cursor = dr.Cursor(topic_name=name, partition_index=start)
                break
            end = min(len(topic.partitions), start + limit)
            limit -= end - start
            topics.append(dr.DescribeTopicPartitionsResponseTopic(
                name=name, topic_id=topic.topic_id, is_internal=name.startswith("__"),
                partitions=[self._partition(topic, i) for i in range(start, end)]))
            if end < len(topic.partitions):
                next_cursor = dr.Cursor(topic_name=name, partition_index=end)
                break
        return dr(topics=topics, next_cursor=next_cursor)

    def _partition(self, topic: Topic, index: int) -> Any:
        st = self.state
        replicas = topic.replicas[index]
        leader = topic.leaders[index]
        error = 0 if st.brokers[leader].up else E.LeaderNotAvailableError.code
        part = DescribeTopicPartitionsResponse.DescribeTopicPartitionsResponseTopic \
            .DescribeTopicPartitionsResponsePartition
        return part(error_code=error, partition_index=index,
                    leader_id=leader if not error else -1,
                    leader_epoch=topic.partitions[index].leader_epoch,
                    replica_nodes=list(replicas),
                    isr_nodes=[r for r in replicas if st.brokers[r].up],
                    eligible_leader_replicas=[], last_known_elr=[],
                    offline_replicas=[r for r in replicas if not st.brokers[r].up])

    # --- features -----------------------------------------------------------------------------
    def api_versions_features(self) -> dict[str, Any]:
        """The feature fields of an ApiVersions response (v3+ carries them)."""
        ar = ApiVersionsResponse
        return {
            "supported_features": [ar.SupportedFeatureKey(name=n, min_version=lo, max_version=hi)
                                   for n, (lo, hi, _) in sorted(SUPPORTED_FEATURES.items())],
            "finalized_features_epoch": self.features_epoch,
            "finalized_features": [ar.FinalizedFeatureKey(name=n, max_version_level=level,
                                                          min_version_level=level)
                                   for n, level in sorted(self.finalized.items())],
        }

    def _feature_error(self, name: str, level: int, upgrade_type: int) -> str | None:
        supported = SUPPORTED_FEATURES.get(name)
        if supported is None:
            return f"the controller does not support the feature {name!r}"
        current = self.finalized.get(name, 0)
        if upgrade_type not in (_UPGRADE, _SAFE_DOWNGRADE, _UNSAFE_DOWNGRADE):
            return f"unknown upgrade type {upgrade_type}"
        if level < 1 and name == _METADATA_VERSION:
            return "metadata.version cannot be deleted"
        if level >= 1 and not supported[0] <= level <= supported[1]:
            return (f"{name} level {level} is outside the supported range "
                    f"{supported[0]}..{supported[1]}")
        if upgrade_type == _UPGRADE and level < current:
            return (f"cannot downgrade {name} from {current} to {level} without a "
                    f"downgrade upgrade type")
        if upgrade_type != _UPGRADE and level > current:
            return f"cannot upgrade {name} from {current} to {level} with a downgrade type"
        if name == _METADATA_VERSION and level < current:
            return ("refusing to downgrade metadata.version: it might delete metadata"
                    if upgrade_type == _SAFE_DOWNGRADE
                    else "unsafe metadata.version downgrades are not supported")
        return None

    def update_features(self, ctx: RequestContext, version: int, req: Any) -> Response:
        ur = UpdateFeaturesResponse
        names = [u.feature for u in req.feature_updates]
        if len(set(names)) != len(names):
            return ur(error_code=E.InvalidRequestError.code,
                      error_message="a feature appears more than once")
        errors: dict[str, str] = {}
        for u in req.feature_updates:
            kind = u.upgrade_type if version >= 1 else (
                _SAFE_DOWNGRADE if u.allow_downgrade else _UPGRADE)
            why = self._feature_error(u.feature, u.max_version_level, kind)
            if why:
                errors[u.feature] = why
        code = E.InvalidUpdateVersionError.code
        results = [ur.UpdatableFeatureResult(feature=n, error_code=code if n in errors else 0,
                                             error_message=errors.get(n)) for n in names]
        if errors:
            first = next(iter(errors.items()))
            return ur(error_code=code, error_message=f"{first[0]}: {first[1]}",
                      results=results)
        validate_only = req.validate_only if version >= 1 else False
        if not validate_only and req.feature_updates:
            for u in req.feature_updates:
                if u.max_version_level < 1:
                    self.finalized.pop(u.feature, None)
                else:
                    self.finalized[u.feature] = u.max_version_level
            self.features_epoch += 1
        return ur(results=results)
