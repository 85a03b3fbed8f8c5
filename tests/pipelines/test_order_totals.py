"""The streaming job's state function (``pipelines.order_totals.running_total``), called as
Spark's ``applyInPandasWithState`` calls it, with pandas frames and a stand-in for the
group's state. (The job itself runs on Spark in ``tests/spark/test_pipelines.py``.)"""

from __future__ import annotations

from typing import Any

import pytest

from pipelines.order_totals import running_total

pd = pytest.importorskip("pandas")


class GroupState:
    """What ``running_total`` uses of Spark's ``GroupState``."""

    def __init__(self, value: tuple[int, float] | None = None) -> None:
        self.value = value

    @property
    def exists(self) -> bool:
        return self.value is not None

    @property
    def get(self) -> tuple[int, float]:
        assert self.value is not None
        return self.value

    def update(self, value: tuple[int, float]) -> None:
        self.value = value


def amounts(*values: float) -> Any:
    return pd.DataFrame({"customer": ["c-1"] * len(values), "amount": list(values)})


def rows(key: str | None, batches: list[Any], state: GroupState) -> list[dict[str, Any]]:
    [frame] = list(running_total((key,), iter(batches), state))
    assert list(frame.columns) == ["customer", "orders", "total"]
    records: list[dict[str, Any]] = frame.to_dict("records")
    return records


def test_a_new_customer_starts_from_nothing() -> None:
    state = GroupState()
    assert rows("c-1", [amounts(10.0, 2.5)], state) == [
        {"customer": "c-1", "orders": 2, "total": 12.5}
    ]
    assert state.value == (2, 12.5)


def test_the_total_goes_on_from_the_state_over_every_frame() -> None:
    state = GroupState((3, 100.0))
    assert rows("c-1", [amounts(1.0), amounts(2.0, 3.0)], state) == [
        {"customer": "c-1", "orders": 6, "total": 106.0}
    ]
    assert state.value == (6, 106.0)
    assert rows("c-1", [amounts(4.0)], state)[0]["orders"] == 7  # and on again


def test_the_total_sent_is_rounded_to_cents_but_the_state_is_not() -> None:
    state = GroupState()
    [row] = rows("c-2", [amounts(0.1, 0.2, 0.004)], state)
    assert row["total"] == 0.3
    assert state.value is not None
    assert state.value[1] == pytest.approx(0.304)
    [row] = rows("c-2", [amounts(0.004)], state)
    assert row["total"] == 0.31  # 0.308, not 0.3 + 0.004 rounded twice


def test_rejected_events_are_counted_under_no_customer() -> None:
    state = GroupState((1, 0.0))
    assert rows(None, [amounts(0.0, 0.0)], state) == [{"customer": None, "orders": 3, "total": 0.0}]
