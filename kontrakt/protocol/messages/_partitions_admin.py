"""Partition administration: ElectLeaders (43, KIP-460), AlterPartitionReassignments (45) and
ListPartitionReassignments (46) of KIP-455, DescribeTopicPartitions (75, KIP-966, paginated by
a cursor) and UpdateFeatures (57, KIP-584; upgrade types of KIP-778)."""

from __future__ import annotations

from kontrakt.protocol.spec import UNKNOWN_AUTHORIZED_OPERATIONS, A, F, S, api

ElectLeadersRequest, ElectLeadersResponse = api(
    43, "ElectLeaders", valid="0-2", flexible="2+",
    request=[
        F("election_type", "int8", "1+",
          about="0: the preferred replica; 1: the first live replica when none is in sync"),
        F("topic_partitions", A(S("TopicPartitions",
            F("topic", "string"),
            F("partitions", A("int32")),
        )), nullable="0+", about="None: every partition"),
        F("timeout_ms", "int32", default=60000),
    ],
    response=[
        F("throttle_time_ms", "int32"),
        F("error_code", "int16", "1+"),
        F("replica_election_results", A(S("ReplicaElectionResult",
            F("topic", "string"),
            F("partition_result", A(S("PartitionResult",
                F("partition_id", "int32"),
                F("error_code", "int16"),
                F("error_message", "string", nullable="0+"),
            ))),
        ))),
    ],
)

AlterPartitionReassignmentsRequest, AlterPartitionReassignmentsResponse = api(
    45, "AlterPartitionReassignments", valid="0-1", flexible="0+",
    request=[
        F("timeout_ms", "int32", default=60000),
        F("allow_replication_factor_change", "bool", "1+", default=True),
        F("topics", A(S("ReassignableTopic",
            F("name", "string"),
            F("partitions", A(S("ReassignablePartition",
                F("partition_index", "int32"),
                F("replicas", A("int32"), nullable="0+", default=None,
                  about="None cancels the partition's pending reassignment"),
            ))),
        ))),
    ],
    response=[
        F("throttle_time_ms", "int32"),
        F("allow_replication_factor_change", "bool", "1+", default=True, ignorable=True),
        F("error_code", "int16"),
        F("error_message", "string", nullable="0+"),
        F("responses", A(S("ReassignableTopicResponse",
            F("name", "string"),
            F("partitions", A(S("ReassignablePartitionResponse",
                F("partition_index", "int32"),
                F("error_code", "int16"),
                F("error_message", "string", nullable="0+"),
            ))),
        ))),
    ],
)

ListPartitionReassignmentsRequest, ListPartitionReassignmentsResponse = api(
    46, "ListPartitionReassignments", valid="0", flexible="0+",
    request=[
        F("timeout_ms", "int32", default=60000),
        F("topics", A(S("ListPartitionReassignmentsTopics",
            F("name", "string"),
            F("partition_indexes", A("int32")),
        )), nullable="0+", default=None, about="None: every ongoing reassignment"),
    ],
    response=[
        F("throttle_time_ms", "int32"),
        F("error_code", "int16"),
        F("error_message", "string", nullable="0+"),
        F("topics", A(S("OngoingTopicReassignment",
            F("name", "string"),
            F("partitions", A(S("OngoingPartitionReassignment",
                F("partition_index", "int32"),
                F("replicas", A("int32")),
                F("adding_replicas", A("int32")),
                F("removing_replicas", A("int32")),
            ))),
        ))),
    ],
)

UpdateFeaturesRequest, UpdateFeaturesResponse = api(
    57, "UpdateFeatures", valid="0-2", flexible="0+",
    request=[
        F("timeout_ms", "int32", default=60000),
        F("feature_updates", A(S("FeatureUpdateKey",
            F("feature", "string"),
            F("max_version_level", "int16", about="< 1 deletes the finalized feature"),
            F("allow_downgrade", "bool", "0"),
            F("upgrade_type", "int8", "1+", default=1,
              about="1 upgrade, 2 safe downgrade, 3 unsafe downgrade"),
        ))),
        F("validate_only", "bool", "1+"),
    ],
    response=[
        F("throttle_time_ms", "int32"),
        F("error_code", "int16"),
        F("error_message", "string", nullable="0+"),
        F("results", A(S("UpdatableFeatureResult",
            F("feature", "string"),
            F("error_code", "int16"),
            F("error_message", "string", nullable="0+"),
        )), "0-1", ignorable=True, about="v2+: only the top-level error is sent"),
    ],
)

_CURSOR = S("Cursor",
    F("topic_name", "string"),
    F("partition_index", "int32"),
)

DescribeTopicPartitionsRequest, DescribeTopicPartitionsResponse = api(
    75, "DescribeTopicPartitions", valid="0", flexible="0+",
    request=[
        F("topics", A(S("TopicRequest",
            F("name", "string"),
        ))),
        F("response_partition_limit", "int32", default=2000),
        F("cursor", _CURSOR, nullable="0+", default=None,
          about="the first topic and partition to describe; None: from the start"),
    ],
    response=[
        F("throttle_time_ms", "int32", ignorable=True),
        F("topics", A(S("DescribeTopicPartitionsResponseTopic",
            F("error_code", "int16"),
            F("name", "string", nullable="0+"),
            F("topic_id", "uuid", ignorable=True),
            F("is_internal", "bool", ignorable=True),
            F("partitions", A(S("DescribeTopicPartitionsResponsePartition",
                F("error_code", "int16"),
                F("partition_index", "int32"),
                F("leader_id", "int32"),
                F("leader_epoch", "int32", default=-1, ignorable=True),
                F("replica_nodes", A("int32")),
                F("isr_nodes", A("int32")),
                F("eligible_leader_replicas", A("int32"), nullable="0+", default=None),
                F("last_known_elr", A("int32"), nullable="0+", default=None),
                F("offline_replicas", A("int32"), ignorable=True),
            ))),
            F("topic_authorized_operations", "int32", default=UNKNOWN_AUTHORIZED_OPERATIONS),
        ))),
        F("next_cursor", _CURSOR, nullable="0+", default=None,
          about="where the next page starts; None: this was the last page"),
    ],
)
