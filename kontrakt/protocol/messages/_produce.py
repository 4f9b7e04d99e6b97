"""Produce (key 0): append record batches to partitions."""

from __future__ import annotations

from kontrakt.protocol.spec import A, F, S, api

ProduceRequest, ProduceResponse = api(
    0, "Produce", valid="3-13", flexible="9+",
    request=[
        F("transactional_id", "string", nullable="0+", default=None),
        F("acks", "int16", about="0: no response, 1: leader only, -1: all in-sync replicas"),
        F("timeout_ms", "int32"),
        F("topic_data", A(S("TopicProduceData",
            F("name", "string", "0-12", ignorable=True),
            F("topic_id", "uuid", "13+", ignorable=True),
            F("partition_data", A(S("PartitionProduceData",
                F("index", "int32"),
                F("records", "records", nullable="0+"),
            ))),
        ))),
    ],
    response=[
        F("responses", A(S("TopicProduceResponse",
            F("name", "string", "0-12", ignorable=True),
            F("topic_id", "uuid", "13+", ignorable=True),
            F("partition_responses", A(S("PartitionProduceResponse",
                F("index", "int32"),
                F("error_code", "int16"),
                F("base_offset", "int64"),
                F("log_append_time_ms", "int64", default=-1, ignorable=True,
                  about="-1 unless the topic uses LogAppendTime"),
                F("log_start_offset", "int64", "5+", default=-1, ignorable=True),
                F("record_errors", A(S("BatchIndexAndErrorMessage",
                    F("batch_index", "int32", "8+"),
                    F("batch_index_error_message", "string", "8+", nullable="8+",
                      default=None),
                )), "8+", ignorable=True, about="the records that made the batch fail"),
                F("error_message", "string", "8+", nullable="8+", default=None,
                  ignorable=True),
                F("current_leader", S("LeaderIdAndEpoch",
                    F("leader_id", "int32", "10+", default=-1),
                    F("leader_epoch", "int32", "10+", default=-1),
                ), "10+", tag=0, about="the new leader after NOT_LEADER_OR_FOLLOWER"),
            ))),
        ))),
        F("throttle_time_ms", "int32", ignorable=True),
        F("node_endpoints", A(S("NodeEndpoint",
            F("node_id", "int32", "10+"),
            F("host", "string", "10+"),
            F("port", "int32", "10+"),
            F("rack", "string", "10+", nullable="10+", default=None),
        )), "10+", tag=0, about="endpoints of the new leaders named in current_leader"),
    ],
)
