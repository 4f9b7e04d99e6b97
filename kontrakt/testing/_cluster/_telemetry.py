"""Client telemetry (KIP-714) answered as a broker with no metrics subscription does:
GetTelemetrySubscriptions (71) assigns a client instance id and requests no metrics, and
PushTelemetry (72) is checked (instance id, subscription id, codec, size) and accepted,
its payload dropped.

The answers are those of Kafka's ``ClientMetricsManager`` when no client-metrics resource
matches: the default push interval (5 minutes), every codec Kafka decompresses, delta
temporality, an empty metrics list, and a subscription id derived from that subscription
(so it stays the same while the subscription does).
"""

from __future__ import annotations

import uuid
import zlib
from typing import Any, Final

from kontrakt.protocol import errors as E
from kontrakt.protocol.messages import (
    GetTelemetrySubscriptionsResponse,
    PushTelemetryResponse,
)
from kontrakt.protocol.spec import Response
from kontrakt.testing._cluster._state import RequestContext

__all__ = ["Telemetry"]

_PUSH_INTERVAL_MS: Final = 300_000  # Kafka's ClientMetricsConfigs.DEFAULT_INTERVAL_MS
_MAX_BYTES: Final = 1_048_576  # telemetry.max.bytes
#: Kafka's preference order: zstd, lz4, gzip, snappy (codec ids of the record batches)
_CODECS: Final = [4, 3, 1, 2]
_ZERO: Final = uuid.UUID(int=0)


class Telemetry:
    """The two telemetry APIs; ``pushes`` counts the pushes accepted per client instance."""

    def __init__(self) -> None:
        self.requested_metrics: list[str] = []
        self.pushes: dict[uuid.UUID, int] = {}

    @property
    def subscription_id(self) -> int:
        """A hash of the subscription (metrics and interval), as a signed int32."""
        crc = zlib.crc32(f"{self.requested_metrics}|{_PUSH_INTERVAL_MS}".encode())
        return crc - (1 << 32) if crc >= 1 << 31 else crc

    def get_subscriptions(self, ctx: RequestContext, version: int, req: Any) -> Response:
        instance = req.client_instance_id
        if instance == _ZERO:
            instance = uuid.uuid4()
        self.pushes.setdefault(instance, 0)
        return GetTelemetrySubscriptionsResponse(
            error_code=0, client_instance_id=instance, subscription_id=self.subscription_id,
            accepted_compression_types=list(_CODECS), push_interval_ms=_PUSH_INTERVAL_MS,
            telemetry_max_bytes=_MAX_BYTES, delta_temporality=True,
            requested_metrics=list(self.requested_metrics))

    def push(self, ctx: RequestContext, version: int, req: Any) -> Response:
        if req.client_instance_id == _ZERO:
            code = E.InvalidRequestError.code
        elif req.subscription_id != self.subscription_id:
            code = E.UnknownSubscriptionIdError.code
        elif req.compression_type != 0 and req.compression_type not in _CODECS:
            code = E.UnsupportedCompressionTypeError.code
        elif len(req.metrics or b"") > _MAX_BYTES:
            code = E.TelemetryTooLargeError.code
        else:
            code = 0
            self.pushes[req.client_instance_id] = self.pushes.get(
                req.client_instance_id, 0) + 1
        return PushTelemetryResponse(error_code=code)
