"""The body of a scrape: the format the ``Accept`` header asks for, the per-queue
families written as ``prometheus_client`` would write them, and label values that
need escaping."""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from hypothesis import given
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.exposition import generate_latest
from prometheus_client.openmetrics import exposition as openmetrics
from prometheus_client.openmetrics.parser import (
    text_string_to_metric_families as parse_openmetrics,
)
from prometheus_client.parser import text_string_to_metric_families as parse_text

from qmgr.server.http.exposition import (
    Exposition,
    SeriesFamily,
    label_text,
    render_series,
    sample_line,
)

QUEUES = ["orders", 'we"ird\\name', "line\nbreak", "système$;journal", "orders;poison"]
VALUES = [0, 7, 1_234_567, 0.001, 86_400.125]


def tables(queues: Sequence[str], values: Sequence[float]) -> list[SeriesFamily]:
    rows = [
        (label_text(("queue",), (queue,)), value)
        for queue, value in zip(queues, values, strict=True)
    ]
    return [
        SeriesFamily(
            "qmgr_queue_messages",
            "gauge",
            "Messages in the queue.\nTwo lines, a \\ too.",
            "".join(sample_line("qmgr_queue_messages", labels, value) for labels, value in rows),
        ),
        SeriesFamily(
            "qmgr_queue_messages_added",
            "counter",
            "Messages added.",
            "".join(sample_line("qmgr_queue_messages_added_total", label, v) for label, v in rows),
        ),
    ]


def as_prometheus_client(queues: Sequence[str], values: Sequence[float]) -> list[Metric]:
    gauge = GaugeMetricFamily(
        "qmgr_queue_messages", "Messages in the queue.\nTwo lines, a \\ too.", labels=["queue"]
    )
    counter = CounterMetricFamily("qmgr_queue_messages_added", "Messages added.", labels=["queue"])
    for queue, value in zip(queues, values, strict=True):
        gauge.add_metric([queue], value)
        counter.add_metric([queue], value)
    return [gauge, counter]


class Families:
    def __init__(self, families: list[Metric]) -> None:
        self.families = families

    def collect(self) -> list[Metric]:
        return self.families


def parsed(families: object) -> list[tuple[str, str, str, list[tuple[str, dict[str, str], float]]]]:
    return [
        (
            family.name,
            family.type,
            family.documentation,
            [(s.name, s.labels, s.value) for s in family.samples],
        )
        for family in families  # type: ignore[attr-defined]
    ]


@pytest.mark.parametrize("openmetrics_format", [False, True], ids=["text", "openmetrics"])
def test_series_families_read_back_as_prometheus_clients_own(openmetrics_format: bool) -> None:
    ours = render_series(tables(QUEUES, VALUES), openmetrics=openmetrics_format).decode()
    registry = CollectorRegistry()
    registry.register(Families(as_prometheus_client(QUEUES, VALUES)))  # type: ignore[arg-type]
    if openmetrics_format:
        theirs = openmetrics.generate_latest(registry).decode()
        assert parsed(parse_openmetrics(ours + "# EOF\n")) == parsed(parse_openmetrics(theirs))
        assert "# TYPE qmgr_queue_messages_added counter\n" in ours
    else:
        theirs = generate_latest(registry).decode()
        assert parsed(parse_text(ours)) == parsed(parse_text(theirs))
        assert "# TYPE qmgr_queue_messages_added_total counter\n" in ours
    # The comment lines are the same to the byte.
    comments = [line for line in theirs.splitlines() if line.startswith("# ") and "EOF" not in line]
    assert [line for line in ours.splitlines() if line.startswith("# ")] == comments


@given(
    st.lists(st.text(min_size=1, max_size=20), min_size=1, max_size=5, unique=True),
    st.data(),
)
def test_any_queue_name_and_value_read_back(names: list[str], data: st.DataObject) -> None:
    values = data.draw(
        st.lists(
            st.one_of(st.integers(0, 2**53), st.floats(0, 1e9, allow_nan=False)),
            min_size=len(names),
            max_size=len(names),
        )
    )
    ours = render_series(tables(names, values), openmetrics=False).decode()
    [gauge, counter] = parse_text(ours)
    assert [(s.labels["queue"], s.value) for s in gauge.samples] == list(
        zip(names, [float(v) for v in values], strict=True)
    )
    assert counter.name == "qmgr_queue_messages_added"


class Fixed:
    def snapshot(self) -> list[str]:
        return ["orders"]

    def series(self, readings: list[str]) -> list[SeriesFamily]:
        return tables(readings, [3])


class Build:
    def collect(self) -> list[Metric]:
        info = GaugeMetricFamily("qmgr_build_info", "Build.", labels=["version"])
        info.add_metric(["1"], 1)
        return [info]


@pytest.mark.parametrize(
    ("accept", "expected"),
    [
        (None, "text/plain; version=0.0.4; charset=utf-8"),
        ("text/plain", "text/plain; version=0.0.4; charset=utf-8"),
        (
            "application/openmetrics-text;version=1.0.0;q=0.5,text/plain;version=0.0.4;q=0.4",
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        ),
        ("application/openmetrics-text", "application/openmetrics-text; version=1.0.0"),
    ],
    ids=["none", "text", "prometheus", "openmetrics without a version"],
)
async def test_the_accept_header_chooses_the_format(accept: str | None, expected: str) -> None:
    registry = CollectorRegistry()
    registry.register(Build())  # type: ignore[arg-type]
    body, content_type = await Exposition(registry, Fixed()).scrape(accept)
    assert content_type.startswith(expected)
    text = body.decode()
    if content_type.startswith("application/openmetrics-text"):
        # The per-queue families come before the one closing line.
        assert text.endswith('qmgr_queue_messages_added_total{queue="orders"} 3\n# EOF\n')
        assert text.count("# EOF") == 1
        names = [family.name for family in parse_openmetrics(text)]
    else:
        names = [family.name for family in parse_text(text)]
    assert names == ["qmgr_build_info", "qmgr_queue_messages", "qmgr_queue_messages_added"]
