"""SaslHandshake (key 17) and SaslAuthenticate (key 36): choose a mechanism, then exchange
its tokens inside Kafka frames."""

from __future__ import annotations

from kontrakt.protocol.spec import A, F, api

SaslHandshakeRequest, SaslHandshakeResponse = api(
    17, "SaslHandshake", valid="0-1", flexible="none",
    request=[
        F("mechanism", "string", about="e.g. PLAIN, SCRAM-SHA-256"),
    ],
    response=[
        F("error_code", "int16"),
        F("mechanisms", A("string"), about="the mechanisms the broker enables"),
    ],
)

SaslAuthenticateRequest, SaslAuthenticateResponse = api(
    36, "SaslAuthenticate", valid="0-2", flexible="2+",
    request=[
        F("auth_bytes", "bytes"),
    ],
    response=[
        F("error_code", "int16"),
        F("error_message", "string", nullable="0+"),
        F("auth_bytes", "bytes"),
        F("session_lifetime_ms", "int64", "1+", ignorable=True,
          about="0, or how long the broker keeps the session before re-authentication"),
    ],
)
