"""Metadata (key 3): brokers, topics, partitions and their leaders."""

from __future__ import annotations

from kontrakt.protocol.spec import UNKNOWN_AUTHORIZED_OPERATIONS, A, F, S, api

MetadataRequest, MetadataResponse = api(
    3, "Metadata", valid="0-13", flexible="9+",
    request=[
        F("topics", A(S("MetadataRequestTopic",
            F("topic_id", "uuid", "10+"),
            F("name", "string", nullable="10+"),
        )), nullable="1+", about="None means all topics (v1+); v0 sends [] for all"),
        F("allow_auto_topic_creation", "bool", "4+", default=True, ignorable=True),
        F("include_cluster_authorized_operations", "bool", "8-10", ignorable=True),
        F("include_topic_authorized_operations", "bool", "8+", ignorable=True),
    ],
    response=[
        F("throttle_time_ms", "int32", "3+"),
        F("brokers", A(S("MetadataResponseBroker",
            F("node_id", "int32"),
            F("host", "string"),
            F("port", "int32"),
            F("rack", "string", "1+", nullable="1+", default=None),
        ))),
        F("cluster_id", "string", "2+", nullable="2+", default=None),
        F("controller_id", "int32", "1+", default=-1),
        F("topics", A(S("MetadataResponseTopic",
            F("error_code", "int16"),
            F("name", "string", nullable="12+"),
            F("topic_id", "uuid", "10+"),
            F("is_internal", "bool", "1+"),
            F("partitions", A(S("MetadataResponsePartition",
                F("error_code", "int16"),
                F("partition_index", "int32"),
                F("leader_id", "int32"),
                F("leader_epoch", "int32", "7+", default=-1),
                F("replica_nodes", A("int32")),
                F("isr_nodes", A("int32")),
                F("offline_replicas", A("int32"), "5+"),
            ))),
            F("topic_authorized_operations", "int32", "8+",
              default=UNKNOWN_AUTHORIZED_OPERATIONS),
        ))),
        F("cluster_authorized_operations", "int32", "8-10",
          default=UNKNOWN_AUTHORIZED_OPERATIONS),
        F("error_code", "int16", "13+"),
    ],
)
