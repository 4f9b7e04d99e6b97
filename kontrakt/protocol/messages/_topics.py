"""Topic administration: CreateTopics (19), DeleteTopics (20), DeleteRecords (21) and
CreatePartitions (37).

Kafka 4.0 brokers no longer accept CreateTopics v0-1 and DeleteTopics v0; they are declared
anyway (their fields are unchanged in Kafka's specification) so older brokers can be spoken to.
"""

from __future__ import annotations

from kontrakt.protocol.spec import A, F, S, api

CreateTopicsRequest, CreateTopicsResponse = api(
    19, "CreateTopics", valid="0-7", flexible="5+",
    request=[
        F("topics", A(S("CreatableTopic",
            F("name", "string"),
            F("num_partitions", "int32", about="-1 for the broker default or manual assignment"),
            F("replication_factor", "int16",
              about="-1 for the broker default or manual assignment"),
            F("assignments", A(S("CreatableReplicaAssignment",
                F("partition_index", "int32"),
                F("broker_ids", A("int32")),
            ))),
            F("configs", A(S("CreatableTopicConfig",
                F("name", "string"),
                F("value", "string", nullable="0+"),
            ))),
        ))),
        F("timeout_ms", "int32", default=60000),
        F("validate_only", "bool", "1+"),
    ],
    response=[
        F("throttle_time_ms", "int32", "2+", ignorable=True),
        F("topics", A(S("CreatableTopicResult",
            F("name", "string"),
            F("topic_id", "uuid", "7+", ignorable=True),
            F("error_code", "int16"),
            F("error_message", "string", "1+", nullable="0+", ignorable=True),
            F("topic_config_error_code", "int16", "5+", tag=0, ignorable=True),
            F("num_partitions", "int32", "5+", default=-1, ignorable=True),
            F("replication_factor", "int16", "5+", default=-1, ignorable=True),
            F("configs", A(S("CreatableTopicConfigs",
                F("name", "string", "5+"),
                F("value", "string", "5+", nullable="5+"),
                F("read_only", "bool", "5+"),
                F("config_source", "int8", "5+", default=-1, ignorable=True),
                F("is_sensitive", "bool", "5+"),
            )), "5+", nullable="5+", ignorable=True),
        ))),
    ],
)

DeleteTopicsRequest, DeleteTopicsResponse = api(
    20, "DeleteTopics", valid="0-6", flexible="4+",
    request=[
        F("topics", A(S("DeleteTopicState",
            F("name", "string", "6+", nullable="6+", default=None),
            F("topic_id", "uuid", "6+"),
        )), "6+", about="v6+: each topic by name or by id"),
        F("topic_names", A("string"), "0-5", ignorable=True, about="v0-5: topics by name"),
        F("timeout_ms", "int32"),
    ],
    response=[
        F("throttle_time_ms", "int32", "1+", ignorable=True),
        F("responses", A(S("DeletableTopicResult",
            F("name", "string", nullable="6+"),
            F("topic_id", "uuid", "6+", ignorable=True),
            F("error_code", "int16"),
            F("error_message", "string", "5+", nullable="5+", default=None, ignorable=True),
        ))),
    ],
)

DeleteRecordsRequest, DeleteRecordsResponse = api(
    21, "DeleteRecords", valid="0-2", flexible="2+",
    request=[
        F("topics", A(S("DeleteRecordsTopic",
            F("name", "string"),
            F("partitions", A(S("DeleteRecordsPartition",
                F("partition_index", "int32"),
                F("offset", "int64", about="delete records before it; -1 = high watermark"),
            ))),
        ))),
        F("timeout_ms", "int32"),
    ],
    response=[
        F("throttle_time_ms", "int32"),
        F("topics", A(S("DeleteRecordsTopicResult",
            F("name", "string"),
            F("partitions", A(S("DeleteRecordsPartitionResult",
                F("partition_index", "int32"),
                F("low_watermark", "int64"),
                F("error_code", "int16"),
            ))),
        ))),
    ],
)

CreatePartitionsRequest, CreatePartitionsResponse = api(
    37, "CreatePartitions", valid="0-3", flexible="2+",
    request=[
        F("topics", A(S("CreatePartitionsTopic",
            F("name", "string"),
            F("count", "int32", about="the new total partition count"),
            F("assignments", A(S("CreatePartitionsAssignment",
                F("broker_ids", A("int32")),
            )), nullable="0+", about="one per new partition; None: broker places them"),
        ))),
        F("timeout_ms", "int32"),
        F("validate_only", "bool"),
    ],
    response=[
        F("throttle_time_ms", "int32"),
        F("results", A(S("CreatePartitionsTopicResult",
            F("name", "string"),
            F("error_code", "int16"),
            F("error_message", "string", nullable="0+", default=None),
        ))),
    ],
)
