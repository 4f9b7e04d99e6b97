"""Cluster description: DescribeCluster (60), DescribeLogDirs (35), AlterReplicaLogDirs (34),
DescribeQuorum (55, the KRaft metadata quorum: KIP-595, KIP-836 for v1's fetch times,
KIP-853 for v2's directory ids, error messages and voter listeners), UnregisterBroker
(64, KIP-500's removal of a KRaft broker's registration), and AddRaftVoter (80) and
RemoveRaftVoter (81), KIP-853's changes of the controller quorum.

AlterReplicaLogDirs v0 (identical to v1 on the wire) was removed by Kafka 4.0 and is not
declared: every broker since Kafka 2.0 offers v1.

Kafka 4.0 brokers no longer accept DescribeLogDirs v0; it is declared anyway (identical to
v1 on the wire) so older brokers can be spoken to. DescribeLogDirs v5 (``is_cordoned``) comes
from a Kafka release newer than 4.1; brokers that lack it simply never negotiate it.
"""

from __future__ import annotations

from kontrakt.protocol.spec import UNKNOWN_AUTHORIZED_OPERATIONS, A, F, S, api

ENDPOINT_TYPE_BROKER = 1

DescribeClusterRequest, DescribeClusterResponse = api(
    60, "DescribeCluster", valid="0-2", flexible="0+",
    request=[
        F("include_cluster_authorized_operations", "bool"),
        F("endpoint_type", "int8", "1+", default=ENDPOINT_TYPE_BROKER,
          about="1 brokers, 2 controllers"),
        F("include_fenced_brokers", "bool", "2+"),
    ],
    response=[
        F("throttle_time_ms", "int32"),
        F("error_code", "int16"),
        F("error_message", "string", nullable="0+", default=None),
        F("endpoint_type", "int8", "1+", default=ENDPOINT_TYPE_BROKER),
        F("cluster_id", "string"),
        F("controller_id", "int32", default=-1),
        F("brokers", A(S("DescribeClusterBroker",
            F("broker_id", "int32"),
            F("host", "string"),
            F("port", "int32"),
            F("rack", "string", nullable="0+", default=None),
            F("is_fenced", "bool", "2+"),
        ))),
        F("cluster_authorized_operations", "int32", default=UNKNOWN_AUTHORIZED_OPERATIONS),
    ],
)

DescribeLogDirsRequest, DescribeLogDirsResponse = api(
    35, "DescribeLogDirs", valid="0-5", flexible="2+",
    request=[
        F("topics", A(S("DescribableLogDirTopic",
            F("topic", "string"),
            F("partitions", A("int32")),
        )), nullable="0+", about="None for every partition on the broker"),
    ],
    response=[
        F("throttle_time_ms", "int32"),
        F("error_code", "int16", "3+", ignorable=True),
        F("results", A(S("DescribeLogDirsResult",
            F("error_code", "int16"),
            F("log_dir", "string"),
            F("topics", A(S("DescribeLogDirsTopic",
                F("name", "string"),
                F("partitions", A(S("DescribeLogDirsPartition",
                    F("partition_index", "int32"),
                    F("partition_size", "int64"),
                    F("offset_lag", "int64"),
                    F("is_future_key", "bool"),
                ))),
            ))),
            F("total_bytes", "int64", "4+", default=-1, ignorable=True),
            F("usable_bytes", "int64", "4+", default=-1, ignorable=True),
            F("is_cordoned", "bool", "5+", default=False, ignorable=True),
        ))),
    ],
)

AlterReplicaLogDirsRequest, AlterReplicaLogDirsResponse = api(
    34, "AlterReplicaLogDirs", valid="1-2", flexible="2+",
    request=[
        F("dirs", A(S("AlterReplicaLogDir",
            F("path", "string", about="the absolute directory path"),
            F("topics", A(S("AlterReplicaLogDirTopic",
                F("name", "string"),
                F("partitions", A("int32")),
            ))),
        ))),
    ],
    response=[
        F("throttle_time_ms", "int32"),
        F("results", A(S("AlterReplicaLogDirTopicResult",
            F("topic_name", "string"),
            F("partitions", A(S("AlterReplicaLogDirPartitionResult",
                F("partition_index", "int32"),
                F("error_code", "int16"),
            ))),
        ))),
    ],
)

# One struct for voters and observers, as in Kafka's specification.
_QUORUM_REPLICA_STATE = S("ReplicaState",
    F("replica_id", "int32"),
    F("replica_directory_id", "uuid", "2+"),
    F("log_end_offset", "int64", about="-1 when unknown"),
    F("last_fetch_timestamp", "int64", "1+", default=-1, ignorable=True,
      about="leader wall clock ms of the follower's last fetch; -1 for the leader or unknown"),
    F("last_caught_up_timestamp", "int64", "1+", default=-1, ignorable=True,
      about="leader wall clock ms of the offset the follower last caught up to"),
)

DescribeQuorumRequest, DescribeQuorumResponse = api(
    55, "DescribeQuorum", valid="0-2", flexible="0+",
    request=[
        F("topics", A(S("TopicData",
            F("topic_name", "string"),
            F("partitions", A(S("PartitionData",
                F("partition_index", "int32"),
            ))),
        ))),
    ],
    response=[
        F("error_code", "int16"),
        F("error_message", "string", "2+", nullable="2+", default=None, ignorable=True),
        F("topics", A(S("TopicData",
            F("topic_name", "string"),
            F("partitions", A(S("PartitionData",
                F("partition_index", "int32"),
                F("error_code", "int16"),
                F("error_message", "string", "2+", nullable="2+", default=None,
                  ignorable=True),
                F("leader_id", "int32", about="-1 when unknown"),
                F("leader_epoch", "int32"),
                F("high_watermark", "int64"),
                F("current_voters", A(_QUORUM_REPLICA_STATE)),
                F("observers", A(_QUORUM_REPLICA_STATE)),
            ))),
        ))),
        F("nodes", A(S("Node",
            F("node_id", "int32", "2+"),
            F("listeners", A(S("Listener",
                F("name", "string", "2+"),
                F("host", "string", "2+"),
                F("port", "uint16", "2+"),
            )), "2+"),
        )), "2+"),
    ],
)

UnregisterBrokerRequest, UnregisterBrokerResponse = api(
    64, "UnregisterBroker", valid="0", flexible="0+",
    request=[
        F("broker_id", "int32"),
    ],
    response=[
        F("throttle_time_ms", "int32"),
        F("error_code", "int16"),
        F("error_message", "string", nullable="0+", default=None),
    ],
)

AddRaftVoterRequest, AddRaftVoterResponse = api(
    80, "AddRaftVoter", valid="0-1", flexible="0+",
    request=[
        F("cluster_id", "string", nullable="0+", default=None),
        F("timeout_ms", "int32"),
        F("voter_id", "int32"),
        F("voter_directory_id", "uuid"),
        F("listeners", A(S("Listener",
            F("name", "string"),
            F("host", "string"),
            F("port", "uint16"),
        ))),
        F("ack_when_committed", "bool", "1+", default=True,
          about="answer once the new voter set is committed, not when the leader wrote it"),
    ],
    response=[
        F("throttle_time_ms", "int32"),
        F("error_code", "int16"),
        F("error_message", "string", nullable="0+", default=None, ignorable=True),
    ],
)

RemoveRaftVoterRequest, RemoveRaftVoterResponse = api(
    81, "RemoveRaftVoter", valid="0", flexible="0+",
    request=[
        F("cluster_id", "string", nullable="0+", default=None),
        F("voter_id", "int32"),
        F("voter_directory_id", "uuid"),
    ],
    response=[
        F("throttle_time_ms", "int32"),
        F("error_code", "int16"),
        F("error_message", "string", nullable="0+", default=None, ignorable=True),
    ],
)
