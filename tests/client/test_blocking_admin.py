"""The blocking client's management calls against a scripted daemon: global transactions
by xid, poison handling, lists, outgoing queues, permissions and trace (their one-request
rows, ``facade_cases.ADMIN``, run in test_blocking)."""

from __future__ import annotations

import datetime as dt

import pytest
from fake_daemon import FakeDaemon
from wire_samples import BILLING, ORDERS, SOURCE_QM

from qmgr.client import (
    InvalidArgument,
    NotSupported,
    QueueNotFound,
    Resolution,
    TransactionAborted,
    TransactionCommitted,
    TransactionInfo,
    TransactionNotFound,
    TransactionStatus,
    connect,
)
from wire import client as cf


def _stamp(seconds: float) -> dt.datetime:
    return dt.datetime.fromtimestamp(seconds, dt.UTC)


def test_resolving_by_xid(fake_daemon: FakeDaemon) -> None:
    script = fake_daemon.two_phase
    for xid in ("a", "b", "c", "d"):
        script.prepared[xid] = (1.0, 1, 0, 10)
    with connect(fake_daemon.address) as qm:
        assert qm.commit_prepared("a") is Resolution.COMMITTED
        assert qm.commit_prepared("a") is Resolution.ALREADY_COMMITTED
        assert qm.abort_prepared("b") is Resolution.ABORTED
        assert qm.abort_prepared("b") is Resolution.ALREADY_ABORTED
        with pytest.raises(TransactionCommitted, match="'a' was committed"):
            qm.abort_prepared("a")
        with pytest.raises(TransactionAborted, match="'b' was aborted"):
            qm.commit_prepared("b")
        with pytest.raises(TransactionNotFound, match="'zz' is not prepared"):
            qm.commit_prepared("zz")
        # All or none: an unknown xid resolves none of them.
        with pytest.raises(TransactionNotFound, match="'zz'"):
            qm.commit_prepared_all(["c", "zz"])
        assert "c" in script.prepared
        assert qm.commit_prepared_all(["c", "a", "d"]) == [
            Resolution.COMMITTED,
            Resolution.ALREADY_COMMITTED,
            Resolution.COMMITTED,
        ]
        assert qm.abort_prepared_all(["b"]) == [Resolution.ALREADY_ABORTED]
        assert qm.commit_prepared_all([]) == []
        assert qm.abort_prepared_all(()) == []
        with pytest.raises(InvalidArgument, match="single str"):
            qm.commit_prepared_all("abc")
    resolves = fake_daemon.requests_of(cf.Resolve)
    assert resolves[0] == cf.Resolve(commit=True, xids=("a",))
    assert resolves[-2] == cf.Resolve(commit=True, xids=("c", "a", "d"))
    assert resolves[-1] == cf.Resolve(commit=False, xids=("b",))
    assert len(resolves) == 10


def test_listing_transactions(fake_daemon: FakeDaemon) -> None:
    script = fake_daemon.two_phase
    script.prepared["spark:1"] = (1_700_000_000.5, 3, 2, 300)
    script.prepared["spark:2"] = (1_700_000_001.0, 0, 1, 0)
    script.prepared["other"] = (1.0, 1, 1, 1)
    script.outcomes["spark:0"] = (False, 1_700_000_002.0)
    with connect(fake_daemon.address) as qm:
        listed = qm.transactions("spark:")
        assert [(t.xid, t.state) for t in listed] == [
            ("spark:1", TransactionStatus.PREPARED),
            ("spark:2", TransactionStatus.PREPARED),
        ]
        assert listed[0] == TransactionInfo(
            xid="spark:1",
            state=TransactionStatus.PREPARED,
            since=1_700_000_000.5,
            sends=3,
            receives=2,
            bytes=300,
        )
        everything = qm.transactions(resolved=True, limit=5)
        assert [t.xid for t in everything] == ["other", "spark:1", "spark:2", "spark:0"]
        assert everything[-1].state is TransactionStatus.ABORTED
        assert len(qm.transactions(limit=1)) == 1
        with pytest.raises(InvalidArgument, match="limit"):
            qm.transactions(limit=2**32)
    assert fake_daemon.requests_of(cf.ListTransactions) == [
        cf.ListTransactions(prefix="spark:", resolved=False, max_count=1000),
        cf.ListTransactions(prefix="", resolved=True, max_count=5),
        cf.ListTransactions(prefix="", resolved=False, max_count=1),
    ]


def test_outgoing_calls(fake_daemon: FakeDaemon) -> None:
    with connect(fake_daemon.address) as qm:
        listed = qm.outgoing()
        assert [q.destination for q in listed] == [ORDERS, BILLING]
        assert listed[0].next_attempt == _stamp(1_700_000_100.0)
        assert listed[1].last_order_ack == _stamp(1_700_000_050.5)
        paused = qm.pause_outgoing(ORDERS)
        assert (paused.destination, paused.state, paused.next_attempt) == (ORDERS, "paused", None)
        assert qm.resume_outgoing(ORDERS).state == "connecting"
        assert qm.purge_outgoing(ORDERS) == 12
        assert qm.purge_outgoing(ORDERS) == 0
        with pytest.raises(QueueNotFound, match="no outgoing queue for 'nowhere'"):
            qm.pause_outgoing("nowhere")
        status = qm.status()
    assert [o.destination for o in status.outgoing] == [ORDERS, BILLING]
    assert status.outgoing[0].waiting == 0
    assert [i.source_qm for i in status.incoming] == [SOURCE_QM]
    controls = fake_daemon.requests_of(cf.ControlOutgoing)
    assert [(c.action, c.destination) for c in controls] == [
        (1, ORDERS),
        (2, ORDERS),
        (3, ORDERS),
        (3, ORDERS),
        (1, "nowhere"),
    ]
    assert len(fake_daemon.requests_of(cf.ListOutgoing)) == 1


def test_outgoing_calls_say_when_peering_is_not_running(fake_daemon: FakeDaemon) -> None:
    fake_daemon.peering.running = False
    with connect(fake_daemon.address) as qm:
        with pytest.raises(NotSupported, match="peering is not running"):
            qm.outgoing()
        with pytest.raises(NotSupported, match="peering is not running"):
            qm.purge_outgoing(ORDERS)
        status = qm.status()
    assert (status.outgoing, status.incoming) == ((), ())
