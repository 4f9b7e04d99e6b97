"""ApiVersions (key 18): which versions of each API a broker supports."""

from __future__ import annotations

from kontrakt.protocol.spec import A, F, S, api

ApiVersionsRequest, ApiVersionsResponse = api(
    18, "ApiVersions", valid="0-4", flexible="3+",
    request=[
        F("client_software_name", "string", "3+", ignorable=True,
          about="the client's name, e.g. kontrakt"),
        F("client_software_version", "string", "3+", ignorable=True),
    ],
    response=[
        F("error_code", "int16"),
        F("api_keys", A(S("ApiVersion",
            F("api_key", "int16"),
            F("min_version", "int16"),
            F("max_version", "int16"),
        ))),
        F("throttle_time_ms", "int32", "1+"),
        F("supported_features", A(S("SupportedFeatureKey",
            F("name", "string", "3+"),
            F("min_version", "int16", "3+"),
            F("max_version", "int16", "3+"),
        )), "3+", tag=0),
        F("finalized_features_epoch", "int64", "3+", tag=1, default=-1),
        F("finalized_features", A(S("FinalizedFeatureKey",
            F("name", "string", "3+"),
            F("max_version_level", "int16", "3+"),
            F("min_version_level", "int16", "3+"),
        )), "3+", tag=2),
        F("zk_migration_ready", "bool", "3+", tag=3),
    ],
)
