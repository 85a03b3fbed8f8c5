"""The writer's transaction ids and query ids, and its commit of a batch job, without
Spark (``qmgr.spark._write``)."""

from __future__ import annotations

from typing import Any

import pytest
from helpers import DaemonProcess, prepare_sends

from qmgr.client import ConnectionLost, QueueManager, connect
from qmgr.spark._options import Options
from qmgr.spark._write import PreparedWrite, QueueBatchWriter, _batch_of, query_id_from_checkpoint


def test_batch_of_xid() -> None:
    assert _batch_of("spark:6f1c:17:3:abcdef") == 17
    assert _batch_of("spark:6f1c") == -1


def test_query_id_from_checkpoint(tmp_path: object) -> None:
    from pathlib import Path

    directory = Path(str(tmp_path))
    assert query_id_from_checkpoint(str(directory)) is None
    (directory / "metadata").write_text('{"id":"6f1c-query"}', encoding="utf-8")
    assert query_id_from_checkpoint(str(directory)) == "6f1c-query"
    assert query_id_from_checkpoint(f"file://{directory}") == "6f1c-query"
    assert query_id_from_checkpoint("hdfs://nn/ckpt") is None


class _CutOff:
    """A queue manager whose ``commit_prepared_all`` is applied, then the connection
    breaks before the answer (the daemon killed right after it committed)."""

    def __init__(self, qm: QueueManager) -> None:
        self._qm = qm

    def __enter__(self) -> _CutOff:
        return self

    def __exit__(self, *exc: object) -> None:
        self._qm.close()

    def commit_prepared_all(self, xids: list[str]) -> None:
        self._qm.commit_prepared_all(xids)
        raise ConnectionLost("the connection broke")

    def transactions(self, prefix: str, **options: Any) -> Any:
        raise ConnectionLost("the connection broke")


@pytest.mark.parametrize("applied", [True, False], ids=["applied", "never-reached"])
def test_a_batch_commit_cut_off_is_judged_by_its_outcome(
    daemon: DaemonProcess, monkeypatch: pytest.MonkeyPatch, applied: bool
) -> None:
    """Spark would report a job failed whose rows were committed, and the job run
    again would write them twice: a commit whose answer was lost asks what became
    of the transactions, and cleaning up afterwards cannot fail the job."""
    options = Options.parse({"endpoint": daemon.address, "queue": "out"})
    writer = QueueBatchWriter(options, "job1")
    with connect(daemon.address) as qm:
        qm.create_queue("out", transactional=True)
        prepare_sends(qm, "out", [f"{writer.job_prefix}0:a", f"{writer.job_prefix}1:b"])
    messages = [
        PreparedWrite((f"{writer.job_prefix}0:a",), 1),
        PreparedWrite((f"{writer.job_prefix}1:b",), 1),
    ]
    real = Options.connect
    calls = iter([True])

    def connect_once_cut(self: Options) -> Any:
        qm = real(self)
        if next(calls, False):
            if applied:
                return _CutOff(qm)
            qm.close()
            raise ConnectionLost("the connection broke")  # as if the commit never went out
        return qm

    monkeypatch.setattr(Options, "connect", connect_once_cut)
    writer.commit(list(messages))  # no error: committed by it, or after it, once
    with connect(daemon.address) as qm:
        assert sorted(m.body for m in qm.peek_range("out")) == [
            f"{writer.job_prefix}0:a".encode(),
            f"{writer.job_prefix}1:b".encode(),
        ]
        assert qm.transactions(writer.job_prefix) == []
