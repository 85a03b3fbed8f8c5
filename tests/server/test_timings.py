"""Durations in buckets (``qmgr.server.timings``): what the sync-time histogram shows."""

from __future__ import annotations

import math

import pytest

from qmgr.server.timings import WRITE_BOUNDS, Durations


def test_a_duration_counts_in_the_first_bucket_at_or_above_it() -> None:
    durations = Durations((0.001, 0.01, 0.1))
    for seconds in (0.0, 0.001, 0.0011, 0.05, 0.1, 3.0):
        durations.note(seconds)
    assert durations.cumulative() == [(0.001, 2), (0.01, 3), (0.1, 5), (math.inf, 6)]
    assert durations.count == 6
    assert durations.sum == pytest.approx(3.1521)


def test_the_bounds_must_increase() -> None:
    assert list(WRITE_BOUNDS) == sorted(WRITE_BOUNDS)
    with pytest.raises(ValueError, match="must increase"):
        Durations((0.1, 0.01))
    with pytest.raises(ValueError, match="must increase"):
        Durations((0.1, 0.1))
