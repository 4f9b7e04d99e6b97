"""Configuration administration: DescribeConfigs (32), AlterConfigs (33),
IncrementalAlterConfigs (44) and ListConfigResources (74; v0 was KIP-714's
ListClientMetricsResources, for client-metrics resources only; v1, KIP-1142, lists every
resource type with configs).

Kafka 4.0 brokers no longer accept DescribeConfigs v0; it is declared anyway (Kafka's
specification still describes it) so older brokers can be spoken to.
"""

from __future__ import annotations

from kontrakt.protocol.spec import A, F, S, api

DescribeConfigsRequest, DescribeConfigsResponse = api(
    32, "DescribeConfigs", valid="0-4", flexible="4+",
    request=[
        F("resources", A(S("DescribeConfigsResource",
            F("resource_type", "int8"),
            F("resource_name", "string"),
            F("configuration_keys", A("string"), nullable="0+",
              about="None for every key of the resource"),
        ))),
        F("include_synonyms", "bool", "1+"),
        F("include_documentation", "bool", "3+"),
    ],
    response=[
        F("throttle_time_ms", "int32"),
        F("results", A(S("DescribeConfigsResult",
            F("error_code", "int16"),
            F("error_message", "string", nullable="0+"),
            F("resource_type", "int8"),
            F("resource_name", "string"),
            F("configs", A(S("DescribeConfigsResourceResult",
                F("name", "string"),
                F("value", "string", nullable="0+"),
                F("read_only", "bool"),
                F("config_source", "int8", "1+", default=-1, ignorable=True),
                F("is_default", "bool", "0"),
                F("is_sensitive", "bool"),
                F("synonyms", A(S("DescribeConfigsSynonym",
                    F("name", "string", "1+"),
                    F("value", "string", "1+", nullable="0+"),
                    F("source", "int8", "1+"),
                )), "1+", ignorable=True),
                F("config_type", "int8", "3+", ignorable=True),
                F("documentation", "string", "3+", nullable="0+", ignorable=True),
            ))),
        ))),
    ],
)

AlterConfigsRequest, AlterConfigsResponse = api(
    33, "AlterConfigs", valid="0-2", flexible="2+",
    request=[
        F("resources", A(S("AlterConfigsResource",
            F("resource_type", "int8"),
            F("resource_name", "string"),
            F("configs", A(S("AlterableConfig",
                F("name", "string"),
                F("value", "string", nullable="0+"),
            )), about="the complete new configuration; keys left out revert to defaults"),
        ))),
        F("validate_only", "bool"),
    ],
    response=[
        F("throttle_time_ms", "int32"),
        F("responses", A(S("AlterConfigsResourceResponse",
            F("error_code", "int16"),
            F("error_message", "string", nullable="0+"),
            F("resource_type", "int8"),
            F("resource_name", "string"),
        ))),
    ],
)

IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse = api(
    44, "IncrementalAlterConfigs", valid="0-1", flexible="1+",
    request=[
        F("resources", A(S("AlterConfigsResource",
            F("resource_type", "int8"),
            F("resource_name", "string"),
            F("configs", A(S("AlterableConfig",
                F("name", "string"),
                F("config_operation", "int8", about="0 set, 1 delete, 2 append, 3 subtract"),
                F("value", "string", nullable="0+"),
            ))),
        ))),
        F("validate_only", "bool"),
    ],
    response=[
        F("throttle_time_ms", "int32"),
        F("responses", A(S("AlterConfigsResourceResponse",
            F("error_code", "int16"),
            F("error_message", "string", nullable="0+"),
            F("resource_type", "int8"),
            F("resource_name", "string"),
        ))),
    ],
)

# Config resource type of ListConfigResources v0 answers: client metrics.
CLIENT_METRICS_RESOURCE_TYPE = 16

ListConfigResourcesRequest, ListConfigResourcesResponse = api(
    74, "ListConfigResources", valid="0-1", flexible="0+",
    request=[
        F("resource_types", A("int8"), "1+", about="empty for every type the broker lists"),
    ],
    response=[
        F("throttle_time_ms", "int32"),
        F("error_code", "int16"),
        F("config_resources", A(S("ConfigResource",
            F("resource_name", "string"),
            F("resource_type", "int8", "1+", default=CLIENT_METRICS_RESOURCE_TYPE,
              ignorable=True),
        ))),
    ],
)
