"""The console's rates (``rates``), plain state given the readings and ``now``:
the daemon-wide rates over the window, each queue's between the last two
readings, and the chart's polylines on one round scale."""

from __future__ import annotations

import pytest

from qmgr.server.http.rates import RateHistory, RatePoint, Reading, chart


def _reading(at: float, added: int, removed: int, commits: int, **queues: int) -> Reading:
    return Reading(at, added, removed, commits, {int(k[1:]): (v, 0) for k, v in queues.items()})


def test_rates_are_the_change_between_readings_over_the_window() -> None:
    history = RateHistory(window=30.0)
    assert history.points() == []
    assert history.queue_rates(1) is None
    history.add(_reading(0.0, 0, 0, 0, q1=0))
    history.add(_reading(10.0, 100, 50, 20, q1=40))
    history.add(_reading(10.0, 999, 999, 999))  # not later: ignored
    [point] = history.points()
    assert (point.added, point.removed, point.commits) == (10.0, 5.0, 2.0)
    assert history.queue_rates(1) == (4.0, 0.0)
    assert history.queue_rates(2) is None  # unknown before
    history.add(_reading(20.0, 50, 60, 30, q1=40, q2=5))  # a queue deleted: no negative rate
    assert history.points()[-1].added == 0.0
    assert history.queue_rates(2) is None  # new since the reading before
    for at in (30.0, 40.0, 50.0):
        history.add(_reading(at, 50, 60, 30))
    assert [p.at for p in history.points()] == [30.0, 40.0, 50.0]  # older than 30 s: gone


def test_the_chart_puts_every_series_on_one_round_scale() -> None:
    history = RateHistory(window=100.0)
    for at, added in ((0.0, 0), (50.0, 500), (100.0, 500)):
        history.add(_reading(at, added, 0, 0))
    drawn = chart(
        history.points(), ("added", "commits"), now=100.0, window=100.0, width=100, height=50
    )
    assert drawn.top == 10.0  # 10/s at most: the scale's top
    assert dict(drawn.lines) == {"added": "50.0,0.0 100.0,50.0", "commits": "50.0,50.0 100.0,50.0"}
    empty = chart([], ("added",), now=0.0)
    assert (empty.top, empty.lines) == (1.0, (("added", ""),))


def test_a_queue_s_rates_count_what_was_added_and_removed_between_the_last_two() -> None:
    history = RateHistory()
    history.add(Reading(0.0, 0, 0, 0, {1: (10, 4), 2: (50, 50)}))
    assert history.queue_rates(1) is None  # one reading: no rate yet
    history.add(Reading(5.0, 0, 0, 0, {1: (30, 9), 2: (0, 0)}))
    assert history.queue_rates(1) == (4.0, 1.0)
    assert history.queue_rates(2) == (0.0, 0.0)  # deleted and made again: no negative rate
    history.add(Reading(25.0, 0, 0, 0, {1: (30, 29)}))
    assert history.queue_rates(1) == (0.0, 1.0)  # the last interval only, over its 20 s
    assert history.queue_rates(2) is None  # gone from the last reading


def test_a_rate_leaves_the_window_once_it_ended_a_whole_window_ago() -> None:
    history = RateHistory(window=20.0)
    for at in (0.0, 10.0, 20.0, 30.0):
        history.add(Reading(at, int(at), 0, 0, {}))
    assert [p.at for p in history.points()] == [20.0, 30.0]  # the one at 10.0 ended 20 s ago
    assert all(p.added == 1.0 for p in history.points())


@pytest.mark.parametrize(
    ("top", "scale"),
    [
        (0.0, 1.0),
        (0.5, 1.0),
        (1.0, 1.0),
        (1.5, 2.0),
        (2.0, 2.0),
        (3.0, 5.0),
        (7.0, 10.0),
        (10.0, 10.0),
        (10.5, 20.0),
        (250.0, 500.0),
        (999.0, 1000.0),
        (1001.0, 2000.0),
    ],
)
def test_the_chart_s_scale_is_one_two_or_five_times_a_power_of_ten(
    top: float, scale: float
) -> None:
    point = RatePoint(at=0.0, added=0.0, removed=top, commits=0.0)
    assert chart([point], ("added", "removed"), now=0.0).top == scale


def test_a_point_older_than_the_window_is_drawn_at_its_left_edge() -> None:
    points = [
        RatePoint(at=-50.0, added=1.0, removed=0.0, commits=0.0),
        RatePoint(at=75.0, added=0.5, removed=0.0, commits=0.0),
    ]
    drawn = chart(points, ("added",), now=100.0, window=100.0, width=200, height=10)
    assert drawn.lines == (("added", "0.0,0.0 150.0,5.0"),)
    assert (drawn.width, drawn.height) == (200, 10)
