"""SCRAM credential administration (KIP-554): DescribeUserScramCredentials (50) and
AlterUserScramCredentials (51). Mechanisms are numbered 1 (SCRAM-SHA-256) and
2 (SCRAM-SHA-512); 0 is unknown."""

from __future__ import annotations

from kontrakt.protocol.spec import A, F, S, api

DescribeUserScramCredentialsRequest, DescribeUserScramCredentialsResponse = api(
    50, "DescribeUserScramCredentials", valid="0", flexible="0+",
    request=[
        F("users", A(S("UserName",
            F("name", "string"),
        )), nullable="0+", about="the users to describe; null or empty: every user"),
    ],
    response=[
        F("throttle_time_ms", "int32"),
        F("error_code", "int16"),
        F("error_message", "string", nullable="0+"),
        F("results", A(S("DescribeUserScramCredentialsResult",
            F("user", "string"),
            F("error_code", "int16"),
            F("error_message", "string", nullable="0+"),
            F("credential_infos", A(S("CredentialInfo",
                F("mechanism", "int8"),
                F("iterations", "int32"),
            ))),
        ))),
    ],
)

AlterUserScramCredentialsRequest, AlterUserScramCredentialsResponse = api(
    51, "AlterUserScramCredentials", valid="0", flexible="0+",
    request=[
        F("deletions", A(S("ScramCredentialDeletion",
            F("name", "string"),
            F("mechanism", "int8"),
        ))),
        F("upsertions", A(S("ScramCredentialUpsertion",
            F("name", "string"),
            F("mechanism", "int8"),
            F("iterations", "int32"),
            F("salt", "bytes"),
            F("salted_password", "bytes"),
        ))),
    ],
    response=[
        F("throttle_time_ms", "int32"),
        F("results", A(S("AlterUserScramCredentialsResult",
            F("user", "string"),
            F("error_code", "int16"),
            F("error_message", "string", nullable="0+"),
        ))),
    ],
)
