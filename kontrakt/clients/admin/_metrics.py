"""Admin client metrics: every request the admin client sends, counted where it is sent.

Request names follow the Java admin client's network metrics (``request-total``,
``request-rate``, ``response-total``, ``request-latency-avg`` / ``-max`` in milliseconds);
errors are Kontrakt's: requests that got no response, and the error codes brokers answered
with, by Kafka's error name (``TOPIC_ALREADY_EXISTS``).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any

from kontrakt.clients._client_metrics import error_codes
from kontrakt.clients._rates import RateWindow
from kontrakt.protocol.errors import for_code

__all__ = ["AdminMetrics", "error_codes"]

# The rated counters, in the order the window stores them.
_RATED = ("requests", "errors")


class AdminMetrics:
    """Counts and latencies of the admin client's requests, by API, and broker errors.

    Updated and read on the admin client's event loop.
    """

    __slots__ = ("by_api", "errors", "latency_max", "latency_sum", "request_errors",
                 "requests", "responses", "window")

    def __init__(self, clock: Callable[[], float] | None = None) -> None:
        """``clock``: monotonic seconds (default :func:`time.monotonic`)."""
        self.window = RateWindow(len(_RATED), clock)
        self.requests = 0
        self.responses = 0
        self.request_errors = 0
        self.latency_sum = 0.0
        self.latency_max = 0.0
        self.by_api: Counter[str] = Counter()
        self.errors: Counter[str] = Counter()

    def _counters(self) -> tuple[int, int]:
        return self.requests, sum(self.errors.values())

    def request_sent(self, api: str) -> None:
        self.requests += 1
        self.by_api[api] += 1

    def response(self, latency: float, response: Any) -> None:
        """A response arrived ``latency`` seconds after its request was sent."""
        self.responses += 1
        self.latency_sum += latency
        self.latency_max = max(self.latency_max, latency)
        for code in error_codes(response):
            self.errors[for_code(code).error_name] += 1
        now = self.window.now()
        if self.window.due(now):
            self.window.sample(now, self._counters())

    def failed(self) -> None:
        """A request got no response (connection lost, timed out, cancelled)."""
        self.request_errors += 1

    def snapshot(self) -> dict[str, Any]:
        """Every metric by name (see :meth:`AsyncAdminClient.metrics`)."""
        r_requests, r_errors = self.window.rates(self._counters())
        return {
            "request-total": self.requests,
            "request-rate": r_requests,
            "response-total": self.responses,
            "request-latency-avg": (self.latency_sum / self.responses * 1000
                                    if self.responses else 0.0),
            "request-latency-max": self.latency_max * 1000,
            "request-error-total": self.request_errors,
            "error-total": sum(self.errors.values()),
            "error-rate": r_errors,
            "requests-by-api": dict(self.by_api),
            "errors-by-name": dict(self.errors),
        }
