"""The stream reader called as Spark 4.0 and 4.1 call it: ``latestOffset()`` without arguments."""

from __future__ import annotations

from helpers import DaemonProcess

from qmgr.client import QueueManager
from qmgr.spark._options import Options
from qmgr.spark._read import QueueStreamReader


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

    def offset(lookup_id: int) -> dict[str, int]:
        return {"queue_id": info.queue_id, "lookup_id": lookup_id}

    reader = QueueStreamReader(options, queue_name, info.queue_id)
    try:
        # Knowing nothing, it cannot go below the checkpoint Spark has: the end of all.
        assert reader.latestOffset() == offset(ids[-1])
        assert len(qm.peek_range(queue_name, max=100)) == 35
    finally:
        reader.stop()

    reader = QueueStreamReader(options, queue_name, info.queue_id)
    try:
        # A restarted query replays its last micro-batch: now the reader knows where it is.
        assert len(reader.partitions(offset(0), offset(ids[4]))) == 2
        assert reader.latestOffset() == offset(ids[14])  # the limit, from there
        assert reader.latestOffset() == offset(ids[24])  # asked again: ids[14] is committed
        assert reader._remover is not None
        reader._remover.wait()
        assert [m.lookup_id for m in qm.peek_range(queue_name, max=100)] == ids[15:]
    finally:
        reader.stop()
