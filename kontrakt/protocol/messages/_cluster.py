"""Cluster description: DescribeCluster (60) and DescribeLogDirs (35).

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
