"""The readers (``qmgr.spark._read``, ``_stream``) without Spark: how a LookupId
range is split into partitions, and the stream reader called as Spark 4.0 and
4.1 call it (``latestOffset()`` without arguments)."""

from __future__ import annotations

import pytest
from helpers import DaemonProcess

from qmgr.client import QueueManager
from qmgr.spark._options import Options
from qmgr.spark._read import split_range
from qmgr.spark._stream import QueueStreamReader, plan_members


def covered(ranges: list[tuple[int, int]]) -> list[int]:
    return [i for lo, hi in ranges for i in range(lo + 1, hi + 1)]


@pytest.mark.parametrize(
    ("after", "through", "first", "parts"),
    [(0, 100, 1, 3), (0, 100, 90, 4), (10, 11, 11, 8), (0, 5, None, 2), (7, 1000, 500, 1)],
)
def test_split_range_covers_exactly_the_range(
    after: int, through: int, first: int | None, parts: int
) -> None:
    ranges = split_range(after, through, first, parts)
    assert covered(ranges) == list(range(after + 1, through + 1))
    assert len(ranges) <= parts
    if first is not None and parts > 1 and through - first >= parts:
        # From the first visible message on, the ranges are of about equal width.
        widths = [hi - max(lo, first - 1) for lo, hi in ranges]
        assert max(widths) - min(widths) <= 1


def test_split_empty_range() -> None:
    assert split_range(5, 5, None, 4) == [(5, 5)]


def test_argument_less_latest_offset_limits_and_removes(
    qm: QueueManager, shared_daemon: DaemonProcess, queue_name: str
) -> None:
    qm.create_queue(queue_name, transactional=True)
    with qm.begin() as tx:
        for i in range(35):
            tx.send(queue_name, f"m{i}")
    ids = [m.lookup_id for m in qm.peek_range(queue_name, max=100)]
    info = qm.measure_range(queue_name)
    options = Options.parse(
        {"endpoint": shared_daemon.address, "queue": queue_name, "maxMessagesPerTrigger": "10"}
    )

    members = plan_members(options, queue_name)

    def offset(lookup_id: int) -> dict[str, int | str]:
        return {"queue_id": info.queue_id, "lookup_id": lookup_id, "guid": str(qm.qm_guid)}

    reader = QueueStreamReader(options, queue_name, members)
    try:
        # Knowing nothing, it cannot go below the checkpoint Spark has: the end of all.
        assert reader.latestOffset() == offset(ids[-1])
        assert len(qm.peek_range(queue_name, max=100)) == 35
    finally:
        reader.stop()

    reader = QueueStreamReader(options, queue_name, members)
    try:
        # A restarted query replays its last micro-batch: now the reader knows where it is.
        assert len(reader.partitions(offset(0), offset(ids[4]))) == 2
        assert reader.latestOffset() == offset(ids[14])  # the limit, from there
        assert reader.latestOffset() == offset(ids[24])  # asked again: ids[14] is committed
        remover = reader.cursors[0].remover
        assert remover is not None
        remover.wait()
        assert [m.lookup_id for m in qm.peek_range(queue_name, max=100)] == ids[15:]
    finally:
        reader.stop()
