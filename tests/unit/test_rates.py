"""RateWindow: per-second rates over the last RATE_WINDOW seconds, with a fake clock."""

from __future__ import annotations

import pytest

from kontrakt.clients._rates import RATE_WINDOW, RateWindow


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def test_rates_cover_the_last_window_not_the_whole_life() -> None:
    clock = Clock()
    w = RateWindow(2, clock)
    # a busy first minute: 100 a second on the first counter, 10 on the second
    for s in range(1, 61):
        clock.t = 1000.0 + s
        w.sample(clock.t, (100 * s, 10 * s))
    assert w.rates((6000, 600)) == pytest.approx([100.0, 10.0])
    # then a quiet minute: only 60 more in total
    for s in range(61, 121):
        clock.t = 1000.0 + s
        w.sample(clock.t, (6000 + (s - 60), 600))
    rate, idle = w.rates((6060, 600))
    assert rate == pytest.approx(1.0, rel=0.05)  # the busy minute has left the window
    assert idle == 0.0


def test_an_idle_spell_gives_zero_not_old_traffic() -> None:
    clock = Clock()
    w = RateWindow(1, clock)
    clock.t += 5
    w.sample(clock.t, (50,))
    clock.t += RATE_WINDOW * 10  # nothing sampled for ten minutes, counters unchanged
    assert w.rates((50,)) == [0.0]


def test_samples_are_kept_at_most_once_a_second() -> None:
    clock = Clock()
    w = RateWindow(1, clock)
    assert not w.due(clock.t + 0.5)
    assert w.due(clock.t + 1.0)
    clock.t += 2.0
    assert w.rates((20,)) == pytest.approx([10.0])
