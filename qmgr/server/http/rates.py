"""The console's rates: what the queue manager did over the last 15 minutes, kept in memory.

Theory of operation
-------------------
The store counts, for every queue, the messages ever added (its next
lookup id, less one) and those still there (its depth); the core counts
commits. None of that is a rate. :class:`RateHistory` turns
readings of those counters, taken every :data:`SAMPLE_SECONDS` seconds by
the console's sampler, into rates:

* the daemon-wide rates of the overview's chart (messages added and
  removed per second, commits per second) for each interval between two
  readings, the last :data:`WINDOW_SECONDS` seconds of them;
* each queue's rates (added and removed per second) between the last
  reading and the one before, read by the queue pages.

Nothing here is on a message's path: a reading walks the store's catalog
(in memory) once per interval. It is plain state, given ``now`` and the
readings (no I/O, no clock).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final

__all__ = ["SAMPLE_SECONDS", "WINDOW_SECONDS", "RateHistory", "RatePoint", "Reading", "chart"]

#: Seconds between two readings.
SAMPLE_SECONDS: Final = 10.0
#: Seconds of history the overview shows.
WINDOW_SECONDS: Final = 15 * 60.0


@dataclass(frozen=True, slots=True)
class Reading:
    """The counters at one moment."""

    #: When (trio's clock).
    at: float
    #: Messages ever added to every queue (outgoing queues excluded).
    added: int
    #: Of them, those no longer there.
    removed: int
    commits: int
    #: Each queue's ``(added, removed)``, by store id.
    queues: Mapping[int, tuple[int, int]]


@dataclass(frozen=True, slots=True)
class RatePoint:
    """The daemon-wide rates over one interval (per second), and when it ended."""

    at: float
    added: float
    removed: float
    commits: float


class RateHistory:
    """Readings in, rates out (see the module docstring)."""

    def __init__(self, window: float = WINDOW_SECONDS) -> None:
        self.window = window
        self._points: deque[RatePoint] = deque()
        self._last: Reading | None = None
        self._before: Reading | None = None

    def add(self, reading: Reading) -> None:
        """Take a reading; a reading not later than the last one is ignored."""
        last = self._last
        if last is not None:
            elapsed = reading.at - last.at
            if elapsed <= 0:
                return
            self._points.append(
                RatePoint(
                    at=reading.at,
                    # A counter that went down (a queue deleted) counts as no change.
                    added=max(0, reading.added - last.added) / elapsed,
                    removed=max(0, reading.removed - last.removed) / elapsed,
                    commits=max(0, reading.commits - last.commits) / elapsed,
                )
            )
            while self._points and self._points[0].at <= reading.at - self.window:
                self._points.popleft()
        self._before, self._last = last, reading

    def points(self) -> list[RatePoint]:
        """The daemon-wide rates of the window, oldest first."""
        return list(self._points)

    def queue_rates(self, queue_id: int) -> tuple[float, float] | None:
        """A queue's messages added and removed per second between the last two
        readings; None before there are two, or for a queue new since."""
        last, before = self._last, self._before
        if last is None or before is None:
            return None
        now_counts = last.queues.get(queue_id)
        then_counts = before.queues.get(queue_id)
        if now_counts is None or then_counts is None:
            return None
        elapsed = last.at - before.at
        return (
            max(0, now_counts[0] - then_counts[0]) / elapsed,
            max(0, now_counts[1] - then_counts[1]) / elapsed,
        )


@dataclass(frozen=True, slots=True)
class Chart:
    """A line chart as SVG coordinates: one polyline per series, and the top of its scale."""

    width: int
    height: int
    #: Each series' name and its points (``"x,y x,y ..."``).
    lines: tuple[tuple[str, str], ...]
    #: The value at the top of the scale.
    top: float


def chart(
    points: Sequence[RatePoint],
    series: Iterable[str],
    *,
    now: float,
    window: float = WINDOW_SECONDS,
    width: int = 720,
    height: int = 160,
) -> Chart:
    """The polylines of ``series`` (names of :class:`RatePoint` fields) over the
    ``window`` seconds that end at ``now``, all on one scale."""
    names = tuple(series)
    top = max((getattr(p, name) for p in points for name in names), default=0.0)
    scale = _nice(top)
    lines = []
    for name in names:
        coords = []
        for point in points:
            x = width * (1 - (now - point.at) / window)
            y = height * (1 - getattr(point, name) / scale)
            coords.append(f"{max(0.0, x):.1f},{y:.1f}")
        lines.append((name, " ".join(coords)))
    return Chart(width, height, tuple(lines), scale)


def _nice(top: float) -> float:
    """A round number at or above ``top`` (1, 2 or 5 times a power of ten; 1 at least)."""
    if top <= 1:
        return 1.0
    magnitude = 10 ** (len(str(int(top))) - 1)
    for step in (1, 2, 5, 10):
        if top <= step * magnitude:
            return float(step * magnitude)
    return float(10 * magnitude)
