"""The blocking client against a scripted daemon: connecting, the messaging calls,
transactions (global ones too), and what an older daemon refuses."""

from __future__ import annotations

import socket

import pytest
from facade_cases import ADMIN, CORE, TWO_BLOCKS, XID, Case, call_blocking, new_frames
from fake_daemon import FakeDaemon
from sdk_kit import check_closed_by_daemon

from qmgr.client import (
    ConnectionLost,
    InvalidArgument,
    LimitExceeded,
    NotSupported,
    QueueManager,
    QueueNotFound,
    RangeInfo,
    TransactionNotFound,
    TransactionUsageError,
    connect,
)
from wire import client as cf


@pytest.mark.parametrize("case", CORE + ADMIN, ids=lambda case: case.id)
def test_each_call_sends_its_request_and_converts_the_reply(
    fake_daemon: FakeDaemon, case: Case
) -> None:
    call_blocking(fake_daemon, case)


def test_connect_says_who_answered_and_close_is_final(fake_daemon: FakeDaemon) -> None:
    qm = connect(fake_daemon.address, client_name="tester")
    assert (qm.qm_name, qm.server_version, qm.address) == ("fake", "0.test", fake_daemon.address)
    assert repr(qm) == f"<QueueManager 'fake' at {fake_daemon.address} (open)>"
    with qm:
        assert not qm.closed
    assert qm.closed
    assert repr(qm).endswith("(closed)>")
    qm.close()  # twice is harmless
    with pytest.raises(ConnectionLost, match="was closed"):
        qm.status()
    with pytest.raises(ConnectionLost, match="was closed"):
        qm.begin()


def test_connect_names_an_address_where_nothing_listens() -> None:
    with socket.socket() as unused:
        unused.bind(("127.0.0.1", 0))
        port = unused.getsockname()[1]
    with pytest.raises(
        ConnectionLost, match=f"cannot connect to the queue manager at 127.0.0.1:{port}"
    ):
        connect(f"127.0.0.1:{port}", timeout=5)
    with pytest.raises(
        ConnectionLost, match="cannot connect to the queue manager at unix:/nonexistent"
    ):
        connect("unix:/nonexistent/qmgr.sock")


def test_a_token_that_cannot_be_sent_is_refused_before_connecting() -> None:
    with socket.socket() as unused:
        unused.bind(("127.0.0.1", 0))
        port = unused.getsockname()[1]
    with pytest.raises(InvalidArgument) as caught:  # not ConnectionLost: nothing listens
        connect(f"127.0.0.1:{port}", token="\udcff")
    assert caught.value.message == (
        "token is not valid Unicode text (position 0: a lone surrogate, "
        "as non-UTF-8 bytes in a command-line argument give)"
    )


def test_a_transaction_commits_its_sends_at_the_end_of_its_block(fake_daemon: FakeDaemon) -> None:
    with connect(fake_daemon.address) as qm:
        with qm.begin() as tx:
            tx.send("orders", b"one", priority=1)
            assert tx.receive("orders", timeout=0) is None
            assert repr(tx) == f"<Transaction {tx.id} (open)>"
        assert tx.ended
        with pytest.raises(RuntimeError), qm.begin() as failed:
            failed.send("orders", b"two")
            raise RuntimeError
        assert isinstance(qm, QueueManager)
    assert [type(r) for r in fake_daemon.requests] == TWO_BLOCKS
    assert fake_daemon.requests_of(cf.Receive)[0].tx_id == tx.id


def test_a_failed_send_fails_the_commit(fake_daemon: FakeDaemon) -> None:
    with connect(fake_daemon.address) as qm:
        tx = qm.begin()
        tx.send("missing", b"x")
        with pytest.raises(QueueNotFound, match="aborted because a send in it failed"):
            tx.commit()
        with pytest.raises(TransactionNotFound, match="has already ended"):
            tx.abort()
    # The send's error was not read before commit() sent the Commit, which the daemon refused.
    assert not fake_daemon.two_phase.open


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


def test_values_that_name_nothing_are_refused_before_they_are_sent(
    fake_daemon: FakeDaemon,
) -> None:
    with connect(fake_daemon.address) as qm:
        sent = len(fake_daemon.requests)
        with pytest.raises(InvalidArgument, match="lookup_id must be a message's lookup id"):
            qm.receive("orders", lookup_id=0)
        with pytest.raises(InvalidArgument, match="must not be negative"):
            qm.peek_range("orders", max=-1)
        for after, count in ((None, 1), (1, None), (1, "5"), (True, 1), (1.0, 1)):
            with pytest.raises(InvalidArgument, match="must be a whole number"):
                qm.peek_range("orders", after=after, max=count)  # type: ignore[arg-type]
        with pytest.raises(InvalidArgument, match="lookup_id must be a whole number"):
            qm.remove_through("orders", None)  # type: ignore[arg-type]
        with pytest.raises(InvalidArgument, match="max_count must be a whole number"):
            qm.measure_range("orders", max_count=2.5)  # type: ignore[arg-type]
        tx = qm.begin()
        with pytest.raises(InvalidArgument, match=r"priority must be 0\.\.7, not 9"):
            tx.send("orders", b"x", priority=9)
        tx.send("orders", b"kept")  # the transaction goes on
        tx.commit()
        assert [type(r) for r in fake_daemon.requests[sent:]] == [cf.Begin, cf.Send, cf.Commit]


def test_numbers_out_of_range_name_the_argument_and_its_range(fake_daemon: FakeDaemon) -> None:
    with connect(fake_daemon.address) as qm:
        sent = len(fake_daemon.requests)
        with pytest.raises(InvalidArgument) as quota:
            qm.create_queue("q", quota=-1)
        assert quota.value.message == (
            f"cannot send this request: quota must be 0..{2**64 - 1} bytes or None, not -1"
        )
        with pytest.raises(InvalidArgument) as retry:
            qm.set_queue_properties("q", retry_count=2**32)
        assert retry.value.message.endswith(
            f"retry_count must be 0..{2**32 - 1} or None, not {2**32}"
        )
        with pytest.raises(InvalidArgument) as app_specific:
            qm.send("q", b"x", app_specific=2**32)
        assert app_specific.value.message == (
            "cannot send this message: app_specific must be 0..4294967295, not 4294967296"
        )
        with pytest.raises(InvalidArgument) as priority:
            qm.send("q", b"x", priority=8)
        assert priority.value.message == "cannot send this message: priority must be 0..7, not 8"
        with pytest.raises(InvalidArgument, match=r"lookup_id must be 0\.\.18446744073709551615"):
            qm.remove_through("q", 2**64)
        with pytest.raises(InvalidArgument, match=r"limit must be 0\.\.4294967295, not -1"):
            qm.transactions(limit=-1)
        assert fake_daemon.requests[sent:] == []
        qm.status()  # nothing was sent: the connection goes on


REFUSAL = "too many connections from 127.0.0.1: at most 2 at once"


def test_a_refused_connection_raises_the_daemons_error(fake_daemon: FakeDaemon) -> None:
    fake_daemon.refusal = cf.ErrorReply(code=int(cf.ErrorCode.LIMIT_EXCEEDED), message=REFUSAL)
    with pytest.raises(LimitExceeded) as refused:
        connect(fake_daemon.address)
    assert refused.value.message == (
        f"the queue manager at {fake_daemon.address} refused the connection: {REFUSAL}"
    )


def test_a_connection_the_daemon_closes_is_lost_with_its_reason(fake_daemon: FakeDaemon) -> None:
    with connect(fake_daemon.address) as qm:
        assert fake_daemon.farewell("closing a connection idle for 3 s") == 1
        check_closed_by_daemon(qm, fake_daemon.address, "closing a connection idle for 3 s")


def test_a_block_left_by_an_interrupted_prepare_says_the_transaction_may_be_in_doubt(
    fake_daemon: FakeDaemon,
) -> None:
    # Ctrl-C while prepare() waits for its reply: the connection breaks, the
    # block's abort cannot reach the daemon, and the transaction may be
    # prepared; the interrupt must say so, or nothing would.
    with connect(fake_daemon.address) as qm:

        def interrupted(*, block: bool) -> None:
            raise KeyboardInterrupt

        with pytest.raises(KeyboardInterrupt) as caught, qm.begin(xid="in-doubt") as tx:
            tx.send("orders", b"x")
            qm._conn._read = interrupted  # type: ignore[method-assign]
            tx.prepare()
    [note] = caught.value.__notes__
    assert "transaction 'in-doubt' may be prepared and in doubt" in note
    assert "qmgr tx abort in-doubt" in note
    # An exception before any prepare leaves nothing in doubt: no note.
    with connect(fake_daemon.address) as qm:
        with pytest.raises(RuntimeError) as plain, qm.begin(xid="plain") as tx:
            qm.close()
            raise RuntimeError
        assert not getattr(plain.value, "__notes__", [])
