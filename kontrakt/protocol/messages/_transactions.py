"""Idempotence and transactions: InitProducerId (22), AddPartitionsToTxn (24),
AddOffsetsToTxn (25), EndTxn (26), WriteTxnMarkers (27), TxnOffsetCommit (28),
DescribeProducers (61), DescribeTransactions (65) and ListTransactions (66).

InitProducerId v6 (two-phase commit, KIP-939) is still marked unstable by Kafka: brokers only
advertise it when unstable versions are enabled. AddPartitionsToTxn v4+ batches several
transactions and is meant for brokers talking to the coordinator; clients use v3 and below.
WriteTxnMarkers is what coordinators send partition leaders; clients send it only to abort a
hanging transaction (KIP-664). Its v0 was removed by Kafka 4.0 and is not declared; v2
(KIP-1228) adds the marker's transaction version.
"""

from __future__ import annotations

from kontrakt.protocol.spec import A, F, S, api

InitProducerIdRequest, InitProducerIdResponse = api(
    22, "InitProducerId", valid="0-6", flexible="2+",
    request=[
        F("transactional_id", "string", nullable="0+",
          about="None for an idempotent producer without transactions"),
        F("transaction_timeout_ms", "int32"),
        F("producer_id", "int64", "3+", default=-1),
        F("producer_epoch", "int16", "3+", default=-1),
        F("enable_2pc", "bool", "6+"),
        F("keep_prepared_txn", "bool", "6+"),
    ],
    response=[
        F("throttle_time_ms", "int32", ignorable=True),
        F("error_code", "int16"),
        F("producer_id", "int64", default=-1),
        F("producer_epoch", "int16"),
        F("ongoing_txn_producer_id", "int64", "6+", default=-1),
        F("ongoing_txn_producer_epoch", "int16", "6+", default=-1),
    ],
)

# One struct shared by the v4+ batched form and the v0-3 form, as in Kafka's specification.
_ADD_PARTITIONS_TOPIC = S("AddPartitionsToTxnTopic",
    F("name", "string"),
    F("partitions", A("int32")),
)
_ADD_PARTITIONS_TOPIC_RESULT = S("AddPartitionsToTxnTopicResult",
    F("name", "string"),
    F("results_by_partition", A(S("AddPartitionsToTxnPartitionResult",
        F("partition_index", "int32"),
        F("partition_error_code", "int16"),
    ))),
)

AddPartitionsToTxnRequest, AddPartitionsToTxnResponse = api(
    24, "AddPartitionsToTxn", valid="0-5", flexible="3+",
    request=[
        F("transactions", A(S("AddPartitionsToTxnTransaction",
            F("transactional_id", "string", "4+"),
            F("producer_id", "int64", "4+"),
            F("producer_epoch", "int16", "4+"),
            F("verify_only", "bool", "4+"),
            F("topics", A(_ADD_PARTITIONS_TOPIC), "4+"),
        )), "4+"),
        F("v3_and_below_transactional_id", "string", "0-3"),
        F("v3_and_below_producer_id", "int64", "0-3"),
        F("v3_and_below_producer_epoch", "int16", "0-3"),
        F("v3_and_below_topics", A(_ADD_PARTITIONS_TOPIC), "0-3"),
    ],
    response=[
        F("throttle_time_ms", "int32"),
        F("error_code", "int16", "4+", ignorable=True),
        F("results_by_transaction", A(S("AddPartitionsToTxnResult",
            F("transactional_id", "string", "4+"),
            F("topic_results", A(_ADD_PARTITIONS_TOPIC_RESULT), "4+"),
        )), "4+"),
        F("results_by_topic_v3_and_below", A(_ADD_PARTITIONS_TOPIC_RESULT), "0-3"),
    ],
)

AddOffsetsToTxnRequest, AddOffsetsToTxnResponse = api(
    25, "AddOffsetsToTxn", valid="0-4", flexible="3+",
    request=[
        F("transactional_id", "string"),
        F("producer_id", "int64"),
        F("producer_epoch", "int16"),
        F("group_id", "string"),
    ],
    response=[
        F("throttle_time_ms", "int32"),
        F("error_code", "int16"),
    ],
)

EndTxnRequest, EndTxnResponse = api(
    26, "EndTxn", valid="0-5", flexible="3+",
    request=[
        F("transactional_id", "string"),
        F("producer_id", "int64"),
        F("producer_epoch", "int16"),
        F("committed", "bool", about="True to commit, False to abort"),
    ],
    response=[
        F("throttle_time_ms", "int32"),
        F("error_code", "int16"),
        F("producer_id", "int64", "5+", default=-1, ignorable=True),
        F("producer_epoch", "int16", "5+", default=-1, ignorable=True),
    ],
)

WriteTxnMarkersRequest, WriteTxnMarkersResponse = api(
    27, "WriteTxnMarkers", valid="1-2", flexible="1+",
    request=[
        F("markers", A(S("WritableTxnMarker",
            F("producer_id", "int64"),
            F("producer_epoch", "int16"),
            F("transaction_result", "bool", about="False to abort, True to commit"),
            F("topics", A(S("WritableTxnMarkerTopic",
                F("name", "string"),
                F("partition_indexes", A("int32")),
            ))),
            F("coordinator_epoch", "int32"),
            F("transaction_version", "int8", "2+", ignorable=True,
              about="0 and 1: the classic protocol; 2: KIP-890's"),
        ))),
    ],
    response=[
        F("markers", A(S("WritableTxnMarkerResult",
            F("producer_id", "int64"),
            F("topics", A(S("WritableTxnMarkerTopicResult",
                F("name", "string"),
                F("partitions", A(S("WritableTxnMarkerPartitionResult",
                    F("partition_index", "int32"),
                    F("error_code", "int16"),
                ))),
            ))),
        ))),
    ],
)

TxnOffsetCommitRequest, TxnOffsetCommitResponse = api(
    28, "TxnOffsetCommit", valid="0-5", flexible="3+",
    request=[
        F("transactional_id", "string"),
        F("group_id", "string"),
        F("producer_id", "int64"),
        F("producer_epoch", "int16"),
        F("generation_id", "int32", "3+", default=-1),
        F("member_id", "string", "3+"),
        F("group_instance_id", "string", "3+", nullable="3+", default=None),
        F("topics", A(S("TxnOffsetCommitRequestTopic",
            F("name", "string"),
            F("partitions", A(S("TxnOffsetCommitRequestPartition",
                F("partition_index", "int32"),
                F("committed_offset", "int64"),
                F("committed_leader_epoch", "int32", "2+", default=-1, ignorable=True),
                F("committed_metadata", "string", nullable="0+"),
            ))),
        ))),
    ],
    response=[
        F("throttle_time_ms", "int32"),
        F("topics", A(S("TxnOffsetCommitResponseTopic",
            F("name", "string"),
            F("partitions", A(S("TxnOffsetCommitResponsePartition",
                F("partition_index", "int32"),
                F("error_code", "int16"),
            ))),
        ))),
    ],
)

DescribeProducersRequest, DescribeProducersResponse = api(
    61, "DescribeProducers", valid="0", flexible="0+",
    request=[
        F("topics", A(S("TopicRequest",
            F("name", "string"),
            F("partition_indexes", A("int32")),
        ))),
    ],
    response=[
        F("throttle_time_ms", "int32"),
        F("topics", A(S("TopicResponse",
            F("name", "string"),
            F("partitions", A(S("PartitionResponse",
                F("partition_index", "int32"),
                F("error_code", "int16"),
                F("error_message", "string", nullable="0+", default=None),
                F("active_producers", A(S("ProducerState",
                    F("producer_id", "int64"),
                    F("producer_epoch", "int32"),
                    F("last_sequence", "int32", default=-1),
                    F("last_timestamp", "int64", default=-1),
                    F("coordinator_epoch", "int32"),
                    F("current_txn_start_offset", "int64", default=-1),
                ))),
            ))),
        ))),
    ],
)

DescribeTransactionsRequest, DescribeTransactionsResponse = api(
    65, "DescribeTransactions", valid="0", flexible="0+",
    request=[
        F("transactional_ids", A("string")),
    ],
    response=[
        F("throttle_time_ms", "int32"),
        F("transaction_states", A(S("TransactionState",
            F("error_code", "int16"),
            F("transactional_id", "string"),
            F("transaction_state", "string"),
            F("transaction_timeout_ms", "int32"),
            F("transaction_start_time_ms", "int64"),
            F("producer_id", "int64"),
            F("producer_epoch", "int16"),
            F("topics", A(S("TopicData",
                F("topic", "string"),
                F("partitions", A("int32")),
            ))),
        ))),
    ],
)

ListTransactionsRequest, ListTransactionsResponse = api(
    66, "ListTransactions", valid="0-2", flexible="0+",
    request=[
        F("state_filters", A("string"), about="empty for every state"),
        F("producer_id_filters", A("int64"), about="empty for every producer"),
        F("duration_filter", "int64", "1+", default=-1,
          about="only transactions running longer than this many ms; -1 for all"),
        F("transactional_id_pattern", "string", "2+", nullable="2+", default=None,
          about="a regular expression on transactional ids; None for all"),
    ],
    response=[
        F("throttle_time_ms", "int32"),
        F("error_code", "int16"),
        F("unknown_state_filters", A("string")),
        F("transaction_states", A(S("TransactionState",
            F("transactional_id", "string"),
            F("producer_id", "int64"),
            F("transaction_state", "string"),
        ))),
    ],
)
