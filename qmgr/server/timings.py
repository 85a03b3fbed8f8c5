"""Durations counted in buckets: what the metrics show as a histogram.

Theory of operation
-------------------
A :class:`Durations` keeps, for fixed upper bounds, how many durations were
at most each bound (the last slot counts those above every bound), their
number and their sum, since the daemon started. Noting one costs a binary
search over a dozen bounds and two additions, so the committer notes every
batch it writes (``Committer.write_times``), never every message. The
HTTP adapter reads the counts at scrape time and turns them into a
Prometheus histogram (cumulative buckets, ``le`` inclusive, as Prometheus
defines them); nothing here knows Prometheus.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Sequence
from typing import Final

__all__ = ["WRITE_BOUNDS", "Durations"]

#: The bounds of the write-and-sync histogram, in seconds: a sync on a fast SSD
#: takes a fraction of a millisecond, on a slow disk or a busy host a good part
#: of a second.
WRITE_BOUNDS: Final = (
    0.0005,
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
)


class Durations:
    """Durations in buckets (see the module docstring)."""

    __slots__ = ("_counts", "bounds", "sum")

    def __init__(self, bounds: Sequence[float] = WRITE_BOUNDS) -> None:
        if list(bounds) != sorted(set(bounds)):
            msg = f"the bounds must increase: {bounds!r}"
            raise ValueError(msg)
        self.bounds = tuple(bounds)
        # One slot per bound, and one for the durations above them all.
        self._counts = [0] * (len(self.bounds) + 1)
        #: Seconds, all durations together.
        self.sum = 0.0

    def note(self, seconds: float) -> None:
        """Count one duration."""
        self._counts[bisect_left(self.bounds, seconds)] += 1
        self.sum += seconds

    @property
    def count(self) -> int:
        """How many durations were noted."""
        return sum(self._counts)

    def cumulative(self) -> list[tuple[float, int]]:
        """``(bound, durations at most bound)`` for each bound, then ``(inf, count)``."""
        running = 0
        found = []
        for bound, counted in zip((*self.bounds, float("inf")), self._counts, strict=True):
            running += counted
            found.append((bound, running))
        return found
