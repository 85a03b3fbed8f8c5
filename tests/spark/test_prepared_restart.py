"""What the Spark sink relies on, through the SDK alone: prepared transactions outlive restarts."""

from __future__ import annotations

from helpers import DaemonProcess, prepare_sends

from qmgr.client import connect


def test_prepared_transaction_survives_a_restart_then_is_resolved_by_id(
    daemon: DaemonProcess,
) -> None:
    with connect(daemon.address) as qm:
        qm.create_queue("out", transactional=True)
        prepare_sends(qm, "out", ["spark-batch:job:0:keep", "spark-batch:job:1:drop"])
        assert qm.peek_range("out") == []

    daemon.kill()  # a crash: prepared transactions are in the store
    daemon.start()

    with connect(daemon.address) as qm:
        listed = {t.xid: t for t in qm.transactions("spark-batch:job:")}
        assert sorted(listed) == ["spark-batch:job:0:keep", "spark-batch:job:1:drop"]
        assert all(t.sends == 1 for t in listed.values())
        assert qm.peek_range("out") == []

        first = qm.commit_prepared("spark-batch:job:0:keep")
        assert first.name == "COMMITTED"
        assert qm.commit_prepared("spark-batch:job:0:keep").name == "ALREADY_COMMITTED"
        assert qm.abort_prepared("spark-batch:job:1:drop").name == "ABORTED"
        assert [m.body for m in qm.peek_range("out")] == [b"spark-batch:job:0:keep"]
        assert qm.transactions("spark-batch:job:") == []
        outcomes = {t.xid: t.state.name for t in qm.transactions("spark-batch:", resolved=True)}
        assert outcomes == {
            "spark-batch:job:0:keep": "COMMITTED",
            "spark-batch:job:1:drop": "ABORTED",
        }
