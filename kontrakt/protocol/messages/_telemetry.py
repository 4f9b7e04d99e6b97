"""Client telemetry (KIP-714): GetTelemetrySubscriptions (71) and PushTelemetry (72).

A client asks which metrics the brokers want (its instance id is the zero UUID until the
broker assigns one), then pushes them, OTLP-encoded and compressed with one of the accepted
codecs, every ``push_interval_ms``; ``terminating`` marks the last push before it closes.
"""

from __future__ import annotations

from kontrakt.protocol.spec import A, F, api

GetTelemetrySubscriptionsRequest, GetTelemetrySubscriptionsResponse = api(
    71, "GetTelemetrySubscriptions", valid="0", flexible="0+",
    request=[
        F("client_instance_id", "uuid",
          about="the id the broker assigned; the zero UUID asks for one"),
    ],
    response=[
        F("throttle_time_ms", "int32"),
        F("error_code", "int16"),
        F("client_instance_id", "uuid"),
        F("subscription_id", "int32", about="changes whenever the subscription does"),
        F("accepted_compression_types", A("int8"), about="in the broker's preference order"),
        F("push_interval_ms", "int32"),
        F("telemetry_max_bytes", "int32"),
        F("delta_temporality", "bool"),
        F("requested_metrics", A("string"),
          about="metric name prefixes; empty: none, a single empty string: all"),
    ],
)

PushTelemetryRequest, PushTelemetryResponse = api(
    72, "PushTelemetry", valid="0", flexible="0+",
    request=[
        F("client_instance_id", "uuid"),
        F("subscription_id", "int32"),
        F("terminating", "bool"),
        F("compression_type", "int8"),
        F("metrics", "bytes", about="OTLP MetricsData, compressed with compression_type"),
    ],
    response=[
        F("throttle_time_ms", "int32"),
        F("error_code", "int16"),
    ],
)
