"""Declarations of every Kafka API Kontrakt speaks, one module per API family.

Importing this package registers every API in :func:`kontrakt.protocol.spec.registry`.
"""

from __future__ import annotations

from kontrakt.protocol.messages._api_versions import ApiVersionsRequest, ApiVersionsResponse
from kontrakt.protocol.messages._metadata import MetadataRequest, MetadataResponse

__all__ = [
    "ApiVersionsRequest",
    "ApiVersionsResponse",
    "MetadataRequest",
    "MetadataResponse",
]
