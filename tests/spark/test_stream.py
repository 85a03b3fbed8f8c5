"""The stream reader's offsets (``qmgr.spark._stream``), one queue manager or a fleet,
without Spark and without queue managers: what Spark keeps in the checkpoint, what the
reader makes of it, and the ranges it plans from it."""

from __future__ import annotations

import json
from typing import Any

import pytest

from qmgr.spark import DataSourceError, Options
from qmgr.spark._read import LookupRange
from qmgr.spark._stream import Member, QueueStreamReader, check_guid

FLEET = Options.parse(
    {"endpoints": "h1:1802,h2:1802,h3:1802", "queue": "orders", "partitions": "1"}
)
MEMBERS = [Member("h1:1802", "g1", 7), Member("h2:1802", "g2", 3), Member("h3:1802", "g3", 7)]


def fleet_reader(members: list[Member] = MEMBERS, options: Options = FLEET) -> QueueStreamReader:
    return QueueStreamReader(options, "orders", members)


def entry(endpoint: str, queue_id: int, lookup_id: int) -> dict[str, Any]:
    return {"endpoint": endpoint, "queue_id": queue_id, "lookup_id": lookup_id}


def test_fleet_offsets_name_each_queue_manager_by_guid() -> None:
    reader = fleet_reader()
    assert reader.initialOffset() == {
        "g1": entry("h1:1802", 7, 0),
        "g2": entry("h2:1802", 3, 0),
        "g3": entry("h3:1802", 7, 0),
    }
    offset = reader._offset([10, 0, 25])
    # Spark keeps offsets as JSON: what it gives back is what the reader made.
    assert reader._ends(json.loads(json.dumps(offset))) == [10, 0, 25]
    assert list(offset) == ["g1", "g2", "g3"]  # the same order every time: equal JSON


def test_single_offsets_name_their_queue_manager_too() -> None:
    options = Options.parse({"endpoint": "h1:1802", "queue": "orders"})
    reader = QueueStreamReader(options, "orders", [Member("h1:1802", "g1", 7)])
    assert reader.initialOffset() == {"queue_id": 7, "lookup_id": 0, "guid": "g1"}
    assert reader._ends({"queue_id": 7, "lookup_id": 42, "guid": "g1"}) == [42]
    assert reader._ends({"queue_id": 7, "lookup_id": 42}) == [42]  # an older checkpoint's
    # A host rebuilt at the same address, whose queue got the same id: refused
    # before its messages are read or removed as if they were the old ones.
    with pytest.raises(DataSourceError, match="h1:1802 now reaches the queue manager g1, not g0"):
        reader._ends({"queue_id": 7, "lookup_id": 42, "guid": "g0"})
    with pytest.raises(DataSourceError, match="written with the option 'endpoints'"):
        reader._ends({"g1": entry("h1:1802", 7, 4)})
    with pytest.raises(DataSourceError, match=r"'orders' at h1:1802 is not the one this query"):
        reader._ends({"queue_id": 8, "lookup_id": 42})


def test_a_queue_manager_added_to_the_fleet_is_read_from_the_beginning() -> None:
    reader = fleet_reader()
    assert reader._ends({"g3": entry("h3:1802", 7, 9), "g1": entry("h1:1802", 7, 5)}) == [5, 0, 9]
    # Its address may change: the GUID says which queue manager it is.
    assert reader._ends({"g2": entry("old-host:1802", 3, 4)}) == [0, 4, 0]


@pytest.mark.parametrize(
    ("offset", "message"),
    [
        ({"g4": entry("h4:1802", 1, 5)}, "reads the queue manager g4 (at h4:1802), which"),
        ({"queue_id": 7, "lookup_id": 5}, "written with the option 'endpoint'"),
        ({"g2": entry("h2:1802", 4, 5)}, "'orders' at h2:1802 is not the one this query read"),
    ],
)
def test_fleet_offsets_that_are_not_this_query_s(offset: dict[str, Any], message: str) -> None:
    with pytest.raises(DataSourceError, match=r"^qmgr data source: ") as info:
        fleet_reader()._ends(offset)
    assert message in str(info.value)


def test_partitions_per_queue_manager() -> None:
    reader = fleet_reader()
    start = reader._offset([10, 4, 0])
    end = reader._offset([20, 4, 30])
    parts = [part for part in reader.partitions(start, end) if isinstance(part, LookupRange)]
    ranges = [(p.endpoint, p.queue_id, p.after, p.through) for p in parts]
    # Nothing new on h2: no task there.
    assert ranges == [("h1:1802", 7, 10, 20), ("h3:1802", 7, 0, 30)]
    assert reader.partitions(end, end) == []
    # The argument-less latestOffset() (Spark 4.0, 4.1) goes on from there.
    assert reader._last_end == [20, 4, 30]


def test_an_address_that_reaches_another_queue_manager_is_refused() -> None:
    class Reached:
        def __init__(self, guid: str) -> None:
            self.qm_guid = guid

    member = Member("h1:1802", "g1", 7)
    check_guid(Reached("g1"), member)  # type: ignore[arg-type]
    with pytest.raises(DataSourceError, match="now reaches the queue manager g2, not g1"):
        check_guid(Reached("g2"), member)  # type: ignore[arg-type]
