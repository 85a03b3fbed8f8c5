"""The body of ``/metrics``: Prometheus text or OpenMetrics, as the scraper asks.

Theory of operation
-------------------
:class:`Exposition` answers one scrape. The ``Accept`` header chooses the
format the way ``prometheus_client`` chooses it (``choose_encoder``):
OpenMetrics 1.0 when the scraper lists ``application/openmetrics-text``
(Prometheus does, first), else the Prometheus text format 0.0.4. The
daemon-wide families and the process collector's are written by
``prometheus_client`` from its registry; the families with a series per
queue (:class:`SeriesFamily`, from ``metrics``) are written here, after
them and before OpenMetrics' closing ``# EOF``: what they show is read on
the event loop (a snapshot), and their lines are written from it on a
worker thread, one scrape at a time, so that a scrape of many queues slows
the daemon's other work a little (the thread and the loop share the GIL)
instead of stopping it for the whole scrape.

Why two writers: ``prometheus_client``'s spends some microseconds on every
sample (it sorts and escapes the labels, looks for suffixes), which with
10,000 queues, their journals and subqueues and six families each comes
to seconds. A :class:`SeriesFamily` carries its sample lines already
written, labels escaped (the collector keeps them from one scrape to the
next, since a queue's name never changes, and fills in the values), which
are the same in both formats; only the ``# HELP`` and ``# TYPE`` lines
differ. Values are Python's own text of an ``int`` or a finite ``float``
(``3``, ``95.25``, ``1e-05``), which both formats read.
The two writers agree on every sample of the same families
(``tests/server/http/test_exposition.py`` parses both and compares).

The formats, as far as these families use them: ``# HELP`` and ``# TYPE``
lines, then one ``name{labels} value`` line per series; a counter is named
with ``_total`` in the Prometheus format's comments and samples, without it
in OpenMetrics' comments. Label values escape ``\\``, ``"`` and newlines.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final, Generic, Literal, Protocol, TypeVar

import trio
from prometheus_client.exposition import choose_encoder
from prometheus_client.registry import CollectorRegistry

__all__ = [
    "OPENMETRICS",
    "Exposition",
    "SeriesFamily",
    "SeriesSource",
    "label_text",
    "render_series",
    "sample_line",
]

#: The media type of OpenMetrics, which the ``Accept`` header names.
OPENMETRICS: Final = "application/openmetrics-text"
_EOF: Final = b"# EOF\n"
_Readings = TypeVar("_Readings")


@dataclass(frozen=True, slots=True)
class SeriesFamily:
    """A family of many series: its name (a counter's without ``_total``), type,
    help, and its sample lines, already written (each as :func:`sample_line`
    writes it): they are the same in both formats."""

    name: str
    kind: Literal["gauge", "counter"]
    documentation: str
    samples: str

    @property
    def sample_name(self) -> str:
        """The name its samples have (``_total`` for a counter)."""
        return f"{self.name}_total" if self.kind == "counter" else self.name


def label_text(names: Sequence[str], values: Sequence[str]) -> str:
    """``{name="value",...}`` with the values escaped, the names in order (pass
    them sorted, as Prometheus writes them)."""
    pairs = zip(names, values, strict=True)
    return "{" + ",".join(f'{name}="{_escape(value)}"' for name, value in pairs) + "}"


def sample_line(sample_name: str, labels: str, value: float) -> str:
    """One sample's line: a count (an ``int``) or a finite number of seconds.

    The collector writes its lines without a call per sample (a template filled
    with ``%s``, an f-string inline), as this does: the reference the tests
    hold them to."""
    return f"{sample_name}{labels} {value}\n"


def _escape(value: str) -> str:
    return value.replace("\\", r"\\").replace("\n", r"\n").replace('"', r"\"")


def _help(text: str) -> str:
    return text.replace("\\", r"\\").replace("\n", r"\n")


def render_series(families: Sequence[SeriesFamily], *, openmetrics: bool) -> bytes:
    """The families in the Prometheus text format, or in OpenMetrics."""
    out: list[str] = []
    for family in families:
        described = family.name if openmetrics else family.sample_name
        out.append(f"# HELP {described} {_help(family.documentation)}\n")
        out.append(f"# TYPE {described} {family.kind}\n")
        out.append(family.samples)
    return "".join(out).encode()


class SeriesSource(Protocol[_Readings]):
    """Where the series families come from (``metrics.QueueManagerCollector``)."""

    def snapshot(self) -> _Readings:
        """What the families show, read now (on the event loop's thread)."""
        ...

    def series(self, readings: _Readings) -> Sequence[SeriesFamily]:
        """The families, written from ``readings`` (on a worker thread)."""
        ...


class Exposition(Generic[_Readings]):
    """Writes the registry and the collector's series families for one scrape."""

    def __init__(self, registry: CollectorRegistry, series: SeriesSource[_Readings]) -> None:
        self.registry = registry
        self._series = series
        # One scrape at a time: they share the collector's label cache, and each
        # holds its body in memory until it is sent.
        self._lock = trio.Lock()

    async def scrape(self, accept: str | None) -> tuple[bytes, str]:
        """The body and its content type for a scrape whose ``Accept`` header is
        ``accept``. What the families show is read on the event loop; the
        per-queue lines are written on a worker thread, so that a scrape of
        many queues does not hold up the daemon's other work."""
        encoder, content_type = choose_encoder(accept or "")
        openmetrics = content_type.startswith(OPENMETRICS)
        async with self._lock:
            head = encoder(self.registry)
            readings = self._series.snapshot()
            tail = await trio.to_thread.run_sync(self._tail, readings, openmetrics)
        if openmetrics:
            assert head.endswith(_EOF)
            return b"".join((head[: -len(_EOF)], tail, _EOF)), content_type
        return head + tail, content_type

    def _tail(self, readings: _Readings, openmetrics: bool) -> bytes:
        return render_series(self._series.series(readings), openmetrics=openmetrics)
