"""Sampled rates of a few counters over a sliding window, for the clients' ``metrics()``.

Like the Java client's sampled rates, a ``*-rate`` metric describes the recent past (the last
:data:`RATE_WINDOW` seconds), not a long-running client's whole life, whose average would
hide a stall that started an hour in.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Sequence

__all__ = ["RATE_WINDOW", "RateWindow"]

#: Seconds of history behind each rate.
RATE_WINDOW = 60.0

# Seconds between two samples: the rate's granularity, and 60 samples at most.
_SAMPLE_EVERY = 1.0


class RateWindow:
    """Per-second rates of a fixed list of monotonic counters.

    Samples (time, counter values) are kept at most one a second; a rate subtracts the
    oldest sample inside the window from the current values. Samples are taken when the
    owner records progress and when metrics are read, so after an idle spell the oldest one
    left may be younger than the window: the rate then spans less time, never traffic from
    before it. Not thread-safe: one thread (the client's event loop) updates and reads it.
    """

    __slots__ = ("_clock", "_samples", "started")

    def __init__(self, width: int, clock: Callable[[], float] | None = None) -> None:
        """``width``: how many counters; ``clock``: monotonic seconds (default
        :func:`time.monotonic`; tests pass their own)."""
        self._clock = clock or time.monotonic
        self.started = self._clock()
        self._samples: deque[tuple[float, tuple[int, ...]]] = deque(
            [(self.started, (0,) * width)])

    def now(self) -> float:
        return self._clock()

    def due(self, now: float) -> bool:
        """Whether :meth:`sample` at ``now`` would keep a new sample (to skip computing
        counters that are costly to read)."""
        return now - self._samples[-1][0] >= _SAMPLE_EVERY

    def sample(self, now: float, counters: Sequence[int]) -> None:
        """Record the counters' values at ``now`` (at most one sample a second is kept)."""
        samples = self._samples
        if now - samples[-1][0] >= _SAMPLE_EVERY:
            samples.append((now, tuple(counters)))
        start = now - RATE_WINDOW
        while samples[0][0] < start:
            samples.popleft()
            if not samples:
                samples.append((now, tuple(counters)))

    def rates(self, counters: Sequence[int]) -> list[float]:
        """Per second, for each counter, over the last :data:`RATE_WINDOW` seconds."""
        now = self._clock()
        self.sample(now, counters)
        since, base = self._samples[0]
        elapsed = max(now - since, 1e-9)
        return [(cur - old) / elapsed for cur, old in zip(counters, base, strict=True)]
