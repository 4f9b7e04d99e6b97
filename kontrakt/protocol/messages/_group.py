"""The classic group protocol: FindCoordinator (key 10), JoinGroup (11), Heartbeat (12),
LeaveGroup (13), SyncGroup (14), DescribeGroups (15), ListGroups (16), DeleteGroups (42)."""

from __future__ import annotations

from kontrakt.protocol.spec import UNKNOWN_AUTHORIZED_OPERATIONS, A, F, S, api

FindCoordinatorRequest, FindCoordinatorResponse = api(
    10, "FindCoordinator", valid="0-6", flexible="3+",
    request=[
        F("key", "string", "0-3", about="a group id or transactional id"),
        F("key_type", "int8", "1+", about="0: group, 1: transaction, 2: share group"),
        F("coordinator_keys", A("string"), "4+", about="v4+ looks up several keys at once"),
    ],
    response=[
        F("throttle_time_ms", "int32", "1+", ignorable=True),
        F("error_code", "int16", "0-3"),
        F("error_message", "string", "1-3", nullable="1-3", ignorable=True),
        F("node_id", "int32", "0-3"),
        F("host", "string", "0-3"),
        F("port", "int32", "0-3"),
        F("coordinators", A(S("Coordinator",
            F("key", "string", "4+"),
            F("node_id", "int32", "4+"),
            F("host", "string", "4+"),
            F("port", "int32", "4+"),
            F("error_code", "int16", "4+"),
            F("error_message", "string", "4+", nullable="4+", ignorable=True),
        )), "4+"),
    ],
)

JoinGroupRequest, JoinGroupResponse = api(
    11, "JoinGroup", valid="0-9", flexible="6+",
    request=[
        F("group_id", "string"),
        F("session_timeout_ms", "int32"),
        F("rebalance_timeout_ms", "int32", "1+", default=-1, ignorable=True),
        F("member_id", "string", about="empty when joining for the first time"),
        F("group_instance_id", "string", "5+", nullable="5+", default=None,
          about="the static membership id, if any"),
        F("protocol_type", "string", about="e.g. consumer"),
        F("protocols", A(S("JoinGroupRequestProtocol",
            F("name", "string"),
            F("metadata", "bytes"),
        ))),
        F("reason", "string", "8+", nullable="8+", default=None, ignorable=True),
    ],
    response=[
        F("throttle_time_ms", "int32", "2+", ignorable=True),
        F("error_code", "int16"),
        F("generation_id", "int32", default=-1),
        F("protocol_type", "string", "7+", nullable="7+", default=None, ignorable=True),
        F("protocol_name", "string", nullable="7+"),
        F("leader", "string"),
        F("skip_assignment", "bool", "9+",
          about="the leader must not assign: the broker runs the assignor"),
        F("member_id", "string"),
        F("members", A(S("JoinGroupResponseMember",
            F("member_id", "string"),
            F("group_instance_id", "string", "5+", nullable="5+", default=None,
              ignorable=True),
            F("metadata", "bytes"),
        )), about="every member's metadata, sent to the leader only"),
    ],
)

HeartbeatRequest, HeartbeatResponse = api(
    12, "Heartbeat", valid="0-4", flexible="4+",
    request=[
        F("group_id", "string"),
        F("generation_id", "int32"),
        F("member_id", "string"),
        F("group_instance_id", "string", "3+", nullable="3+", default=None),
    ],
    response=[
        F("throttle_time_ms", "int32", "1+", ignorable=True),
        F("error_code", "int16"),
    ],
)

LeaveGroupRequest, LeaveGroupResponse = api(
    13, "LeaveGroup", valid="0-5", flexible="4+",
    request=[
        F("group_id", "string"),
        F("member_id", "string", "0-2"),
        F("members", A(S("MemberIdentity",
            F("member_id", "string", "3+"),
            F("group_instance_id", "string", "3+", nullable="3+", default=None),
            F("reason", "string", "5+", nullable="5+", default=None, ignorable=True),
        )), "3+", about="v3+ removes several (static) members at once"),
    ],
    response=[
        F("throttle_time_ms", "int32", "1+", ignorable=True),
        F("error_code", "int16"),
        F("members", A(S("MemberResponse",
            F("member_id", "string", "3+"),
            F("group_instance_id", "string", "3+", nullable="3+"),
            F("error_code", "int16", "3+"),
        )), "3+"),
    ],
)

SyncGroupRequest, SyncGroupResponse = api(
    14, "SyncGroup", valid="0-5", flexible="4+",
    request=[
        F("group_id", "string"),
        F("generation_id", "int32"),
        F("member_id", "string"),
        F("group_instance_id", "string", "3+", nullable="3+", default=None),
        F("protocol_type", "string", "5+", nullable="5+", default=None, ignorable=True),
        F("protocol_name", "string", "5+", nullable="5+", default=None, ignorable=True),
        F("assignments", A(S("SyncGroupRequestAssignment",
            F("member_id", "string"),
            F("assignment", "bytes"),
        )), about="sent by the leader only"),
    ],
    response=[
        F("throttle_time_ms", "int32", "1+", ignorable=True),
        F("error_code", "int16"),
        F("protocol_type", "string", "5+", nullable="5+", default=None, ignorable=True),
        F("protocol_name", "string", "5+", nullable="5+", default=None, ignorable=True),
        F("assignment", "bytes"),
    ],
)

DescribeGroupsRequest, DescribeGroupsResponse = api(
    15, "DescribeGroups", valid="0-6", flexible="5+",
    request=[
        F("groups", A("string")),
        F("include_authorized_operations", "bool", "3+"),
    ],
    response=[
        F("throttle_time_ms", "int32", "1+", ignorable=True),
        F("groups", A(S("DescribedGroup",
            F("error_code", "int16"),
            F("error_message", "string", "6+", nullable="6+", default=None),
            F("group_id", "string"),
            F("group_state", "string"),
            F("protocol_type", "string"),
            F("protocol_data", "string", about="the chosen protocol, e.g. range"),
            F("members", A(S("DescribedGroupMember",
                F("member_id", "string"),
                F("group_instance_id", "string", "4+", nullable="4+", default=None,
                  ignorable=True),
                F("client_id", "string"),
                F("client_host", "string"),
                F("member_metadata", "bytes"),
                F("member_assignment", "bytes"),
            ))),
            F("authorized_operations", "int32", "3+",
              default=UNKNOWN_AUTHORIZED_OPERATIONS),
        ))),
    ],
)

ListGroupsRequest, ListGroupsResponse = api(
    16, "ListGroups", valid="0-5", flexible="3+",
    request=[
        F("states_filter", A("string"), "4+", about="empty lists groups in every state"),
        F("types_filter", A("string"), "5+", about="empty lists groups of every type"),
    ],
    response=[
        F("throttle_time_ms", "int32", "1+", ignorable=True),
        F("error_code", "int16"),
        F("groups", A(S("ListedGroup",
            F("group_id", "string"),
            F("protocol_type", "string"),
            F("group_state", "string", "4+", ignorable=True),
            F("group_type", "string", "5+", ignorable=True),
        ))),
    ],
)

DeleteGroupsRequest, DeleteGroupsResponse = api(
    42, "DeleteGroups", valid="0-2", flexible="2+",
    request=[
        F("groups_names", A("string")),
    ],
    response=[
        F("throttle_time_ms", "int32"),
        F("results", A(S("DeletableGroupResult",
            F("group_id", "string"),
            F("error_code", "int16"),
        ))),
    ],
)
