"""The low-level client's metrics: the requests :class:`AsyncKafkaClient` sends, by API.

Counted around each request its request path sends (``request()``, the metadata refreshes,
coordinator lookups); the producer's and the fetcher's own connections are counted by their
clients' metrics instead. Names follow the Java client's network metrics (``request-total``,
``request-rate``, ``response-total``, ``request-latency-avg`` / ``-max`` in milliseconds), as
the admin client's do; errors are the error codes in responses, by Kafka's error name.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from kontrakt.clients._rates import RateWindow
from kontrakt.protocol.errors import for_code

__all__ = ["ClientMetrics", "error_codes"]

T = TypeVar("T")


def error_codes(message: Any) -> list[int]:
    """Every non-zero ``error_code`` in a response: its own and those of the structs it
    holds (per topic, partition, group, resource...)."""
    found: list[int] = []
    stack = [message]
    while stack:
        item = stack.pop()
        for name in getattr(type(item), "__slots__", ()):
            value = getattr(item, name, None)
            if name == "error_code":
                if value:
                    found.append(value)
            elif isinstance(value, list):
                stack.extend(v for v in value if hasattr(type(v), "__slots__"))
            elif value is not None and hasattr(type(value), "__slots__") and not isinstance(
                    value, (str, bytes, int, float)):
                stack.append(value)
    return found


class _PerApi:
    __slots__ = ("errors", "failed", "latency_max", "latency_sum", "requests", "responses")

    def __init__(self) -> None:
        self.requests = 0
        self.responses = 0
        self.failed = 0
        self.errors = 0
        self.latency_sum = 0.0
        self.latency_max = 0.0


class ClientMetrics:
    """Counts and latencies of a client's requests, in total and by API name.

    Updated and read on the client's event loop.
    """

    __slots__ = ("_apis", "_clock", "errors", "window")

    def __init__(self, clock: Callable[[], float] | None = None) -> None:
        """``clock``: monotonic seconds (default :func:`time.monotonic`)."""
        self._clock = clock or time.monotonic
        self.window = RateWindow(2, self._clock)
        self._apis: dict[str, _PerApi] = {}
        self.errors: Counter[str] = Counter()

    def _totals(self) -> tuple[int, int]:
        return (sum(a.requests for a in self._apis.values()),
                sum(a.errors for a in self._apis.values()))

    async def timed(self, api: str, sending: Awaitable[T]) -> T:
        """Await ``sending`` (one request of ``api``), counting it, its response's latency
        and error codes, or its failure (no response: connection lost, timed out,
        cancelled), which is re-raised."""
        per = self._apis.get(api)
        if per is None:
            per = self._apis[api] = _PerApi()
        per.requests += 1
        sent = self._clock()
        try:
            response = await sending
        except BaseException:
            per.failed += 1
            raise
        latency = self._clock() - sent
        per.responses += 1
        per.latency_sum += latency
        per.latency_max = max(per.latency_max, latency)
        if response is not None:  # Produce with acks=0 has none
            for code in error_codes(response):
                per.errors += 1
                self.errors[for_code(code).error_name] += 1
        now = self.window.now()
        if self.window.due(now):
            self.window.sample(now, self._totals())
        return response

    def snapshot(self) -> dict[str, Any]:
        """Every metric by name (see :meth:`AsyncKafkaClient.metrics`)."""
        apis = self._apis.values()
        requests, errors = self._totals()
        r_requests, r_errors = self.window.rates((requests, errors))
        responses = sum(a.responses for a in apis)
        latency = sum(a.latency_sum for a in apis)
        return {
            "request-total": requests,
            "request-rate": r_requests,
            "response-total": responses,
            "request-latency-avg": latency / responses * 1000 if responses else 0.0,
            "request-latency-max": max((a.latency_max for a in apis), default=0.0) * 1000,
            "request-error-total": sum(a.failed for a in apis),
            "error-total": errors,
            "error-rate": r_errors,
            "errors-by-name": dict(self.errors),
            "apis": {name: {
                "request-total": a.requests,
                "response-total": a.responses,
                "request-error-total": a.failed,
                "error-total": a.errors,
                "request-latency-avg": (a.latency_sum / a.responses * 1000
                                        if a.responses else 0.0),
                "request-latency-max": a.latency_max * 1000,
            } for name, a in sorted(self._apis.items())},
        }
