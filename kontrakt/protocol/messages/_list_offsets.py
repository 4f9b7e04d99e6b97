"""ListOffsets (key 2): the offset of a partition at a timestamp, or its earliest/latest."""

from __future__ import annotations

from kontrakt.protocol.spec import A, F, S, api

LATEST_TIMESTAMP = -1
EARLIEST_TIMESTAMP = -2
MAX_TIMESTAMP = -3
EARLIEST_LOCAL_TIMESTAMP = -4
LATEST_TIERED_TIMESTAMP = -5

ListOffsetsRequest, ListOffsetsResponse = api(
    2, "ListOffsets", valid="1-10", flexible="6+",
    request=[
        F("replica_id", "int32", about="-1 for consumers"),
        F("isolation_level", "int8", "2+", about="0: read uncommitted, 1: read committed"),
        F("topics", A(S("ListOffsetsTopic",
            F("name", "string"),
            F("partitions", A(S("ListOffsetsPartition",
                F("partition_index", "int32"),
                F("current_leader_epoch", "int32", "4+", default=-1, ignorable=True),
                F("timestamp", "int64",
                  about="a time in ms, or -1 latest, -2 earliest, -3 max timestamp"),
            ))),
        ))),
        F("timeout_ms", "int32", "10+", ignorable=True,
          about="how long to wait for remote-storage lookups"),
    ],
    response=[
        F("throttle_time_ms", "int32", "2+", ignorable=True),
        F("topics", A(S("ListOffsetsTopicResponse",
            F("name", "string"),
            F("partitions", A(S("ListOffsetsPartitionResponse",
                F("partition_index", "int32"),
                F("error_code", "int16"),
                F("timestamp", "int64", default=-1),
                F("offset", "int64", default=-1),
                F("leader_epoch", "int32", "4+", default=-1),
            ))),
        ))),
    ],
)
