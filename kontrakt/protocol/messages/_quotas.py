"""Client quotas (KIP-546): DescribeClientQuotas (48) and AlterClientQuotas (49). Entity
types are ``user``, ``client-id`` and ``ip``; a null entity name is the default entity.
Filter match types: 0 exact name, 1 the default entity, 2 any name."""

from __future__ import annotations

from kontrakt.protocol.spec import A, F, S, api

DescribeClientQuotasRequest, DescribeClientQuotasResponse = api(
    48, "DescribeClientQuotas", valid="0-1", flexible="1+",
    request=[
        F("components", A(S("ComponentData",
            F("entity_type", "string"),
            F("match_type", "int8"),
            F("match", "string", nullable="0+"),
        ))),
        F("strict", "bool"),
    ],
    response=[
        F("throttle_time_ms", "int32"),
        F("error_code", "int16"),
        F("error_message", "string", nullable="0+"),
        F("entries", A(S("EntryData",
            F("entity", A(S("EntityData",
                F("entity_type", "string"),
                F("entity_name", "string", nullable="0+"),
            ))),
            F("values", A(S("ValueData",
                F("key", "string"),
                F("value", "float64"),
            ))),
        )), nullable="0+"),
    ],
)

AlterClientQuotasRequest, AlterClientQuotasResponse = api(
    49, "AlterClientQuotas", valid="0-1", flexible="1+",
    request=[
        F("entries", A(S("EntryData",
            F("entity", A(S("EntityData",
                F("entity_type", "string"),
                F("entity_name", "string", nullable="0+"),
            ))),
            F("ops", A(S("OpData",
                F("key", "string"),
                F("value", "float64"),
                F("remove", "bool"),
            ))),
        ))),
        F("validate_only", "bool"),
    ],
    response=[
        F("throttle_time_ms", "int32"),
        F("entries", A(S("EntryData",
            F("error_code", "int16"),
            F("error_message", "string", nullable="0+"),
            F("entity", A(S("EntityData",
                F("entity_type", "string"),
                F("entity_name", "string", nullable="0+"),
            ))),
        ))),
    ],
)
