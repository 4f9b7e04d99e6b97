"""Delegation tokens (KIP-48, KIP-373 for owners): CreateDelegationToken (38),
RenewDelegationToken (39), ExpireDelegationToken (40), DescribeDelegationToken (41)."""

from __future__ import annotations

from kontrakt.protocol.spec import A, F, S, api

CreateDelegationTokenRequest, CreateDelegationTokenResponse = api(
    38, "CreateDelegationToken", valid="0-3", flexible="2+",
    request=[
        F("owner_principal_type", "string", v="3+", nullable="3+",
          about="the token owner's principal type; null: the requester"),
        F("owner_principal_name", "string", v="3+", nullable="3+",
          about="the token owner's principal name; null: the requester"),
        F("renewers", A(S("CreatableRenewers",
            F("principal_type", "string"),
            F("principal_name", "string"),
        ))),
        F("max_lifetime_ms", "int64",
          about="the token's largest lifetime; -1: the broker's default"),
    ],
    response=[
        F("error_code", "int16"),
        F("principal_type", "string"),
        F("principal_name", "string"),
        F("token_requester_principal_type", "string", v="3+"),
        F("token_requester_principal_name", "string", v="3+"),
        F("issue_timestamp_ms", "int64"),
        F("expiry_timestamp_ms", "int64"),
        F("max_timestamp_ms", "int64"),
        F("token_id", "string"),
        F("hmac", "bytes"),
        F("throttle_time_ms", "int32"),
    ],
)

RenewDelegationTokenRequest, RenewDelegationTokenResponse = api(
    39, "RenewDelegationToken", valid="0-2", flexible="2+",
    request=[
        F("hmac", "bytes"),
        F("renew_period_ms", "int64"),
    ],
    response=[
        F("error_code", "int16"),
        F("expiry_timestamp_ms", "int64"),
        F("throttle_time_ms", "int32"),
    ],
)

ExpireDelegationTokenRequest, ExpireDelegationTokenResponse = api(
    40, "ExpireDelegationToken", valid="0-2", flexible="2+",
    request=[
        F("hmac", "bytes"),
        F("expiry_time_period_ms", "int64"),
    ],
    response=[
        F("error_code", "int16"),
        F("expiry_timestamp_ms", "int64"),
        F("throttle_time_ms", "int32"),
    ],
)

DescribeDelegationTokenRequest, DescribeDelegationTokenResponse = api(
    41, "DescribeDelegationToken", valid="0-3", flexible="2+",
    request=[
        F("owners", A(S("DescribeDelegationTokenOwner",
            F("principal_type", "string"),
            F("principal_name", "string"),
        )), nullable="0+", about="owners whose tokens to describe; null: every token"),
    ],
    response=[
        F("error_code", "int16"),
        F("tokens", A(S("DescribedDelegationToken",
            F("principal_type", "string"),
            F("principal_name", "string"),
            F("token_requester_principal_type", "string", v="3+"),
            F("token_requester_principal_name", "string", v="3+"),
            F("issue_timestamp", "int64"),
            F("expiry_timestamp", "int64"),
            F("max_timestamp", "int64"),
            F("token_id", "string"),
            F("hmac", "bytes"),
            F("renewers", A(S("DescribedDelegationTokenRenewer",
                F("principal_type", "string"),
                F("principal_name", "string"),
            ))),
        ))),
        F("throttle_time_ms", "int32"),
    ],
)
