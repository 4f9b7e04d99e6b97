"""Shared test setup."""

from __future__ import annotations

import warnings

# confluent-kafka's schema_registry package (a test oracle) imports authlib, which warns at
# import time about its own httpx integration. Import it once here, quietly, so that the
# warning does not depend on which test module happens to import it first.
with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    try:
        import confluent_kafka.schema_registry  # noqa: F401
    except ImportError:  # pragma: no cover - the peer is optional
        pass
