"""Access control lists: DescribeAcls (29), CreateAcls (30) and DeleteAcls (31).

Kafka 4.0 brokers no longer accept v0 of these APIs; v0 is declared anyway (Kafka's
specification still describes it) so older brokers can be spoken to. v0 has no pattern type:
setting one other than LITERAL (3) at v0 raises :class:`~kontrakt.errors.UnsupportedVersionError`.
"""

from __future__ import annotations

from kontrakt.protocol.spec import A, F, S, api

PATTERN_TYPE_LITERAL = 3

DescribeAclsRequest, DescribeAclsResponse = api(
    29, "DescribeAcls", valid="0-3", flexible="2+",
    request=[
        F("resource_type_filter", "int8"),
        F("resource_name_filter", "string", nullable="0+"),
        F("pattern_type_filter", "int8", "1+", default=PATTERN_TYPE_LITERAL),
        F("principal_filter", "string", nullable="0+"),
        F("host_filter", "string", nullable="0+"),
        F("operation", "int8"),
        F("permission_type", "int8"),
    ],
    response=[
        F("throttle_time_ms", "int32"),
        F("error_code", "int16"),
        F("error_message", "string", nullable="0+"),
        F("resources", A(S("DescribeAclsResource",
            F("resource_type", "int8"),
            F("resource_name", "string"),
            F("pattern_type", "int8", "1+", default=PATTERN_TYPE_LITERAL),
            F("acls", A(S("AclDescription",
                F("principal", "string"),
                F("host", "string"),
                F("operation", "int8"),
                F("permission_type", "int8"),
            ))),
        ))),
    ],
)

CreateAclsRequest, CreateAclsResponse = api(
    30, "CreateAcls", valid="0-3", flexible="2+",
    request=[
        F("creations", A(S("AclCreation",
            F("resource_type", "int8"),
            F("resource_name", "string"),
            F("resource_pattern_type", "int8", "1+", default=PATTERN_TYPE_LITERAL),
            F("principal", "string"),
            F("host", "string"),
            F("operation", "int8"),
            F("permission_type", "int8"),
        ))),
    ],
    response=[
        F("throttle_time_ms", "int32"),
        F("results", A(S("AclCreationResult",
            F("error_code", "int16"),
            F("error_message", "string", nullable="0+"),
        ))),
    ],
)

DeleteAclsRequest, DeleteAclsResponse = api(
    31, "DeleteAcls", valid="0-3", flexible="2+",
    request=[
        F("filters", A(S("DeleteAclsFilter",
            F("resource_type_filter", "int8"),
            F("resource_name_filter", "string", nullable="0+"),
            F("pattern_type_filter", "int8", "1+", default=PATTERN_TYPE_LITERAL),
            F("principal_filter", "string", nullable="0+"),
            F("host_filter", "string", nullable="0+"),
            F("operation", "int8"),
            F("permission_type", "int8"),
        ))),
    ],
    response=[
        F("throttle_time_ms", "int32"),
        F("filter_results", A(S("DeleteAclsFilterResult",
            F("error_code", "int16"),
            F("error_message", "string", nullable="0+"),
            F("matching_acls", A(S("DeleteAclsMatchingAcl",
                F("error_code", "int16"),
                F("error_message", "string", nullable="0+"),
                F("resource_type", "int8"),
                F("resource_name", "string"),
                F("pattern_type", "int8", "1+", default=PATTERN_TYPE_LITERAL),
                F("principal", "string"),
                F("host", "string"),
                F("operation", "int8"),
                F("permission_type", "int8"),
            ))),
        ))),
    ],
)
