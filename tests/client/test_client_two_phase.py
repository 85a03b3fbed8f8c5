"""Global (two-phase) transactions and queue ranges in the SDK: both clients, a scripted daemon.

What goes out (the frames), what comes back (the values), how errors map,
what a transaction allows before and after prepare(), and the clear refusal
of a daemon too old for these requests.
"""

from __future__ import annotations

import dataclasses
import time

import pytest
from fake_daemon import FakeDaemon

import qmgr.client as sdk
from qmgr.client import (
    ConnectionLost,
    InvalidArgument,
    LimitExceeded,
    NotSupported,
    QueueNotFound,
    RangeInfo,
    Resolution,
    TransactionAborted,
    TransactionCommitted,
    TransactionInfo,
    TransactionNotFound,
    TransactionStatus,
    TransactionUsageError,
    connect,
    open_client,
)
from qmgr.client import _two_phase as two_phase
from qmgr.client._transaction import TransactionState, prepare_interrupted, prepared
from wire import client_frames as cf

XID = "spark:q1:7:0:0123456789ab"


def new_frames(daemon: FakeDaemon) -> list[cf.FrameValue]:
    """The requests of the kinds that need protocol version 3."""
    return [r for r in daemon.requests if type(r) in cf.TWO_PHASE_REQUESTS]


# ----------------------------------------------------------------------
# The public values
# ----------------------------------------------------------------------


def test_the_new_names_are_public_and_documented() -> None:
    for name in (
        "Resolution",
        "TransactionStatus",
        "TransactionInfo",
        "RangeInfo",
        "TransactionCommitted",
    ):
        assert name in sdk.__all__
        assert getattr(sdk, name).__doc__
    assert Resolution is cf.Resolution
    assert [r.name for r in Resolution] == [
        "COMMITTED",
        "ALREADY_COMMITTED",
        "ABORTED",
        "ALREADY_ABORTED",
    ]
    assert TransactionCommitted.code is cf.ErrorCode.TRANSACTION_COMMITTED
    for cls in (sdk.QueueManager, sdk.AsyncQueueManager):
        for method in (
            "commit_prepared",
            "abort_prepared",
            "commit_prepared_all",
            "abort_prepared_all",
            "transactions",
            "remove_through",
            "measure_range",
        ):
            assert getattr(cls, method).__doc__, (cls, method)
    for tx_cls in (sdk.Transaction, sdk.AsyncTransaction):
        assert tx_cls.prepare.__doc__
        assert tx_cls.xid.__doc__


def test_transaction_info_from_wire() -> None:
    since = time.time() - 90
    wire = cf.TransactionInfo(xid="x", state=1, since=since, sends=2, receives=3, bytes=40)
    info = TransactionInfo.from_wire(wire)
    assert info == TransactionInfo(
        xid="x", state=TransactionStatus.PREPARED, since=since, sends=2, receives=3, bytes=40
    )
    assert 89 < info.age < 120
    assert info.state == "prepared"
    states = [TransactionInfo.from_wire(dataclasses.replace(wire, state=s)) for s in (2, 3)]
    assert [i.state for i in states] == [TransactionStatus.COMMITTED, TransactionStatus.ABORTED]
    future = TransactionInfo.from_wire(dataclasses.replace(wire, since=1e12))
    assert future.age == 0.0
    with pytest.raises(ConnectionLost, match="unknown transaction state 9"):
        TransactionInfo.from_wire(dataclasses.replace(wire, state=9))


def test_replies_are_converted_and_the_wrong_kind_refused() -> None:
    assert two_phase.resolutions(cf.Resolutions(outcomes=(1, 4)), 2) == [
        Resolution.COMMITTED,
        Resolution.ALREADY_ABORTED,
    ]
    with pytest.raises(ConnectionLost, match="protocol error"):
        two_phase.resolutions(cf.Resolutions(outcomes=(1,)), 2)
    with pytest.raises(ConnectionLost, match="protocol error"):
        two_phase.resolutions(cf.Resolutions(outcomes=(5,)), 1)
    with pytest.raises(ConnectionLost, match="not Resolutions"):
        two_phase.resolutions(cf.Ok(), 1)
    with pytest.raises(ConnectionLost, match="not TransactionList"):
        two_phase.transaction_list(cf.Ok())
    with pytest.raises(ConnectionLost, match="not RangeInfo"):
        two_phase.range_info(cf.NoMessage())
    assert two_phase.range_info(cf.RangeInfo(queue_id=1, count=2, last=3)) == RangeInfo(
        queue_id=1, count=2, last=3
    )


@pytest.mark.parametrize(
    ("xid", "match"),
    [
        ("", "1 to 200 bytes"),
        ("x" * 201, "not 201"),
        ("\u00e9" * 101, "not 202"),
        ("a\nb", "U\\+000A"),
        ("a\x7fb", "U\\+007F"),
        ("\ud800", "UTF-8"),
        (b"bytes", "must be a str, not bytes"),
    ],
)
def test_invalid_xids_are_refused_before_anything_is_sent(xid: object, match: str) -> None:
    with pytest.raises(InvalidArgument, match=match):
        two_phase.check_xid(xid)
    assert two_phase.check_xid("x" * 200) == "x" * 200
    assert two_phase.check_xid("\u00e9" * 100) == "\u00e9" * 100


def test_resolve_requests_are_checked() -> None:
    assert two_phase.resolve_request([], commit=True) is None
    assert two_phase.resolve_request(["a", "b"], commit=False) == cf.Resolve(
        commit=False, xids=("a", "b")
    )
    with pytest.raises(InvalidArgument, match="not a single str"):
        two_phase.resolve_request("abc", commit=True)
    with pytest.raises(InvalidArgument, match="at most 10000"):
        two_phase.resolve_request([f"x{i}" for i in range(10_001)], commit=True)
    with pytest.raises(InvalidArgument, match="1 to 200 bytes"):
        two_phase.resolve_request(["a", ""], commit=True)
    with pytest.raises(InvalidArgument, match="limit"):
        two_phase.list_request("", False, -1)


def test_an_interrupted_prepare_leaves_only_abort() -> None:
    state = TransactionState(3, "x")
    prepare_interrupted(state)
    assert not state.prepared
    with pytest.raises(TransactionAborted, match="the prepare in transaction 'x' failed"):
        state.check()
    state.end(commit=True)  # becomes an abort
    assert state.phase == "ended"


def test_a_prepare_lost_with_the_connection_may_have_happened() -> None:
    state = TransactionState(3, "x")
    with pytest.raises(ConnectionLost, match="'x' may have been prepared"):
        prepared(state, ConnectionLost("the connection failed"))


# ----------------------------------------------------------------------
# The blocking client
# ----------------------------------------------------------------------


def test_begin_send_prepare_commit(fake_daemon: FakeDaemon) -> None:
    with connect(fake_daemon.address) as qm:
        tx = qm.begin(xid=XID)
        assert (tx.xid, tx.prepared, tx.ended) == (XID, False, False)
        tx.send("orders", b"one")
        tx.send("orders", b"two")
        tx.prepare()
        assert (tx.prepared, tx.ended) == (True, False)
        assert "prepared" in repr(tx)
        assert fake_daemon.two_phase.prepared[XID][1:] == (2, 0, 6)
        tx.commit()
        assert (tx.prepared, tx.ended) == (False, True)
        assert qm.begin().xid is None
    begin, prepare, resolve = new_frames(fake_daemon)
    assert begin == cf.BeginGlobal(tx_id=tx.id, xid=XID)
    assert prepare == cf.Prepare(tx_id=tx.id)
    assert resolve == cf.Resolve(commit=True, xids=(XID,))
    assert fake_daemon.two_phase.outcomes[XID][0] is True
    assert not fake_daemon.requests_of(cf.Commit)


def test_only_commit_or_abort_follow_prepare(fake_daemon: FakeDaemon) -> None:
    with connect(fake_daemon.address) as qm:
        tx = qm.begin(xid="a")
        tx.prepare()
        with pytest.raises(TransactionUsageError, match="'a' is prepared: only commit"):
            tx.send("orders", b"late")
        with pytest.raises(TransactionUsageError, match="'a' is prepared"):
            tx.receive("orders")
        with pytest.raises(TransactionUsageError, match="'a' is prepared"):
            tx.prepare()
        tx.abort()
        with pytest.raises(TransactionNotFound, match="'a' has already ended"):
            tx.commit()
    assert len(fake_daemon.requests_of(cf.Prepare)) == 1
    assert not fake_daemon.requests_of(cf.Receive)
    assert fake_daemon.requests_of(cf.Resolve) == [cf.Resolve(commit=False, xids=("a",))]
    assert fake_daemon.two_phase.outcomes["a"][0] is False


def test_prepare_needs_an_xid(fake_daemon: FakeDaemon) -> None:
    with connect(fake_daemon.address) as qm, qm.begin() as tx:
        with pytest.raises(TransactionUsageError, match=r"begin\(xid=\.\.\.\)"):
            tx.prepare()
        tx.send("orders", b"still usable")
    assert not fake_daemon.requests_of(cf.Prepare)
    assert len(fake_daemon.requests_of(cf.Commit)) == 1


def test_the_block_commits_a_prepared_transaction_or_aborts_it(fake_daemon: FakeDaemon) -> None:
    with connect(fake_daemon.address) as qm:
        with qm.begin(xid="ok") as tx:
            tx.prepare()
        with pytest.raises(RuntimeError), qm.begin(xid="bad") as tx:
            tx.prepare()
            raise RuntimeError
        with qm.begin(xid="one-phase") as tx:  # committed without a prepare
            tx.send("orders", b"x")
    assert fake_daemon.requests_of(cf.Resolve) == [
        cf.Resolve(commit=True, xids=("ok",)),
        cf.Resolve(commit=False, xids=("bad",)),
    ]
    assert len(fake_daemon.requests_of(cf.Commit)) == 1
    outcomes = fake_daemon.two_phase.outcomes
    assert (outcomes["ok"][0], outcomes["bad"][0], outcomes["one-phase"][0]) == (True, False, True)


def test_a_failed_send_aborts_at_prepare(fake_daemon: FakeDaemon) -> None:
    with connect(fake_daemon.address) as qm:
        tx = qm.begin(xid="f")
        tx.send("missing", b"x")
        with pytest.raises(QueueNotFound, match="'f' was aborted because a send in it failed"):
            tx.prepare()
        assert tx.ended
    assert "f" not in fake_daemon.two_phase.prepared


def test_a_failed_prepare_leaves_only_abort(fake_daemon: FakeDaemon) -> None:
    with connect(fake_daemon.address) as qm:
        tx = qm.begin(xid="full-1")
        with pytest.raises(LimitExceeded, match="10000 transactions"):
            tx.prepare()
        assert not tx.prepared
        assert not tx.ended
        with pytest.raises(LimitExceeded, match="the prepare in transaction 'full-1' failed"):
            tx.send("orders", b"x")
        with pytest.raises(LimitExceeded, match="'full-1' was aborted because the prepare"):
            tx.commit()
    assert len(fake_daemon.requests_of(cf.Abort)) == 1
    assert not fake_daemon.two_phase.open


def test_an_xid_in_use_is_reported_by_the_next_call(fake_daemon: FakeDaemon) -> None:
    fake_daemon.two_phase.outcomes["used"] = (True, 1.0)
    with connect(fake_daemon.address) as qm:
        tx = qm.begin(xid="used")
        message = "transaction 'used' could not begin: transaction id 'used' is in use"
        with pytest.raises(InvalidArgument, match=message):
            tx.prepare()
        assert tx.ended
        other = qm.begin(xid="used")
        with pytest.raises(InvalidArgument, match=message):
            other.receive("orders")  # the Begin's failure came before the receive's reply
        with pytest.raises(InvalidArgument, match=message):
            other.commit()
        assert other.ended


def test_invalid_xids_are_refused_at_begin(fake_daemon: FakeDaemon) -> None:
    with connect(fake_daemon.address) as qm:
        with pytest.raises(InvalidArgument):
            qm.begin(xid="")
        with pytest.raises(InvalidArgument):
            qm.commit_prepared("x\x00")
        qm.begin().commit()
    assert not new_frames(fake_daemon)


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


def test_ranges(fake_daemon: FakeDaemon) -> None:
    with connect(fake_daemon.address) as qm:
        assert qm.measure_range("orders") == RangeInfo(queue_id=7, count=5, last=12)
        assert qm.measure_range("orders", after=4, max_count=2) == RangeInfo(
            queue_id=7, count=2, last=9
        )
        assert qm.measure_range("orders", after=12) == RangeInfo(queue_id=7, count=0, last=12)
        assert qm.remove_through("orders", 5) == 3
        assert qm.remove_through("orders", 5) == 0
        assert qm.measure_range("orders") == RangeInfo(queue_id=7, count=2, last=12)
        with pytest.raises(QueueNotFound):
            qm.remove_through("nowhere", 1)
        with pytest.raises(QueueNotFound):
            qm.measure_range("nowhere")
        with pytest.raises(InvalidArgument, match="cannot send"):
            qm.remove_through("orders", -1)
    assert fake_daemon.requests_of(cf.RemoveThrough)[0] == cf.RemoveThrough(
        queue="orders", lookup_id=5
    )
    assert fake_daemon.requests_of(cf.MeasureRange)[1] == cf.MeasureRange(
        queue="orders", after=4, max_count=2
    )


def test_an_older_daemon_is_told_apart() -> None:
    daemon = FakeDaemon(version=2)
    try:
        with connect(daemon.address) as qm:
            calls = [
                lambda: qm.begin(xid="x"),
                lambda: qm.commit_prepared("x"),
                lambda: qm.abort_prepared("x"),
                lambda: qm.commit_prepared_all(["x"]),
                lambda: qm.abort_prepared_all(["x"]),
                lambda: qm.transactions(),
                lambda: qm.remove_through("orders", 5),
                lambda: qm.measure_range("orders"),
            ]
            for call in calls:
                with pytest.raises(NotSupported, match="speaks version 2") as excinfo:
                    call()
                assert "needs a queue manager that speaks protocol version 3" in str(excinfo.value)
            with qm.begin() as tx:  # the rest works as before
                tx.send("orders", b"x")
            assert not qm.closed
        assert not new_frames(daemon)
        assert daemon.requests_of(cf.Begin)
    finally:
        daemon.close()


# ----------------------------------------------------------------------
# The trio client
# ----------------------------------------------------------------------


async def test_trio_begin_send_prepare_commit(fake_daemon: FakeDaemon) -> None:
    async with open_client(fake_daemon.address) as qm:
        tx = qm.begin(xid=XID)
        assert tx.xid == XID
        await tx.send("orders", b"one")
        await tx.prepare()
        assert tx.prepared
        with pytest.raises(TransactionUsageError, match="is prepared"):
            await tx.send("orders", b"late")
        with pytest.raises(TransactionUsageError, match="is prepared"):
            await tx.receive("orders")
        with pytest.raises(TransactionUsageError, match="is prepared"):
            await tx.prepare()
        await tx.commit()
        assert tx.ended
        assert not tx.prepared
        async with qm.begin(xid="block") as block:
            await block.prepare()
        plain = await qm.begin()
        with pytest.raises(TransactionUsageError, match="has no xid"):
            await plain.prepare()
        await plain.abort()
    assert new_frames(fake_daemon) == [
        cf.BeginGlobal(tx_id=tx.id, xid=XID),
        cf.Prepare(tx_id=tx.id),
        cf.Resolve(commit=True, xids=(XID,)),
        cf.BeginGlobal(tx_id=block.id, xid="block"),
        cf.Prepare(tx_id=block.id),
        cf.Resolve(commit=True, xids=("block",)),
    ]


async def test_trio_failed_prepares(fake_daemon: FakeDaemon) -> None:
    async with open_client(fake_daemon.address) as qm:
        tx = qm.begin(xid="f")
        await tx.send("missing", b"x")
        with pytest.raises(QueueNotFound, match="was aborted because a send in it failed"):
            await tx.prepare()
        assert tx.ended
        full = qm.begin(xid="full-2")
        with pytest.raises(LimitExceeded):
            await full.prepare()
        await full.abort()
    assert not fake_daemon.two_phase.open


async def test_trio_resolving_listing_and_ranges(fake_daemon: FakeDaemon) -> None:
    script = fake_daemon.two_phase
    script.prepared["a"] = (1.0, 1, 0, 10)
    script.prepared["b"] = (2.0, 0, 1, 0)
    async with open_client(fake_daemon.address) as qm:
        listed = await qm.transactions()
        assert [(t.xid, t.sends, t.receives) for t in listed] == [("a", 1, 0), ("b", 0, 1)]
        assert await qm.commit_prepared("a") is Resolution.COMMITTED
        assert await qm.abort_prepared_all(["b"]) == [Resolution.ABORTED]
        assert await qm.commit_prepared_all([]) == []
        with pytest.raises(TransactionCommitted):
            await qm.abort_prepared("a")
        with pytest.raises(TransactionAborted):
            await qm.commit_prepared_all(["b"])
        assert await qm.abort_prepared("b") is Resolution.ALREADY_ABORTED
        resolved = await qm.transactions(resolved=True)
        assert [(t.xid, t.state) for t in resolved] == [
            ("a", TransactionStatus.COMMITTED),
            ("b", TransactionStatus.ABORTED),
        ]
        assert await qm.measure_range("orders", after=3) == RangeInfo(queue_id=7, count=4, last=12)
        assert await qm.remove_through("orders", 9) == 4
        with pytest.raises(QueueNotFound):
            await qm.measure_range("nowhere")
    assert fake_daemon.requests_of(cf.ListTransactions)[1] == cf.ListTransactions(resolved=True)


async def test_trio_an_older_daemon_is_told_apart() -> None:
    daemon = FakeDaemon(version=2)
    try:
        async with open_client(daemon.address) as qm:
            with pytest.raises(NotSupported, match=r"begin\(xid=\.\.\.\) needs"):
                qm.begin(xid="x")
            with pytest.raises(NotSupported, match=r"commit_prepared\(\) needs"):
                await qm.commit_prepared("x")
            with pytest.raises(NotSupported, match=r"transactions\(\) needs"):
                await qm.transactions()
            with pytest.raises(NotSupported, match=r"remove_through\(\) needs"):
                await qm.remove_through("orders", 1)
            with pytest.raises(NotSupported, match=r"measure_range\(\) needs"):
                await qm.measure_range("orders")
        assert not new_frames(daemon)
    finally:
        daemon.close()
