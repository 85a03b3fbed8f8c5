"""prepare(), commit() and abort() as calls: what goes out, and what each outcome raises."""

from __future__ import annotations

import pytest
from client_kit import NOT_FOUND, error, new_protocol, run_call

from qmgr.client import (
    ConnectionLost,
    LimitExceeded,
    QueueNotFound,
    TransactionAborted,
    TransactionCommitted,
    TransactionNotFound,
    TransactionUsageError,
)
from qmgr.client._transaction import TransactionState
from qmgr.client.calls import transactions
from wire import client as cf


def begun(xid: str | None = "x") -> TransactionState:
    return TransactionState(3, xid)


def test_prepare_then_commit_by_xid() -> None:
    state = begun()
    prepared = run_call(transactions.prepare, state, answers=[cf.Ok()])
    assert prepared.requests == [cf.Prepare(tx_id=3)]
    assert state.prepared
    committed = run_call(
        transactions.end, state, commit=True, answers=[cf.Resolutions(outcomes=(1,))]
    )
    assert committed.requests == [cf.Resolve(commit=True, xids=("x",))]
    assert state.ended


def test_prepare_needs_an_xid_and_sends_nothing_without() -> None:
    with pytest.raises(TransactionUsageError, match=r"has no xid.*begin\(xid=\.\.\.\)"):
        run_call(transactions.prepare, begun(None))


def test_a_failed_prepare_leaves_only_abort() -> None:
    state = begun()
    with pytest.raises(LimitExceeded, match="too many"):
        run_call(
            transactions.prepare, state, answers=[error(cf.ErrorCode.LIMIT_EXCEEDED, "too many")]
        )
    assert not state.ended
    with pytest.raises(LimitExceeded, match="the prepare in transaction 'x' failed"):
        state.check()
    with pytest.raises(LimitExceeded, match="'x' was aborted because the prepare in it failed"):
        run_call(transactions.end, state, commit=True, answers=[cf.Ok()])  # an Abort goes out


def test_a_prepare_lost_with_the_connection_may_have_happened() -> None:
    with pytest.raises(ConnectionLost, match="'x' may have been prepared"):
        run_call(transactions.prepare, begun(), answers=[ConnectionLost("the connection failed")])


def test_an_interrupted_prepare_is_aborted_whichever_way_it_went() -> None:
    state = begun()
    with pytest.raises(KeyboardInterrupt):
        run_call(transactions.prepare, state, answers=[KeyboardInterrupt()])
    assert state.unsure
    with pytest.raises(TransactionAborted, match="interrupted before its reply was read"):
        state.check()
    # abort() sends an Abort (whose reply nobody waits for) and a Resolve that aborts the xid.
    not_prepared = error(cf.ErrorCode.TRANSACTION_NOT_FOUND, "no 'x'")
    run = run_call(transactions.end, state, commit=False, answers=[not_prepared])
    assert run.requests == [cf.Abort(tx_id=3), cf.Resolve(commit=False, xids=("x",))]


def test_commit_and_abort_send_their_request() -> None:
    assert run_call(transactions.end, begun(None), commit=True, answers=[cf.Ok()]).requests == [
        cf.Commit(tx_id=3)
    ]
    assert run_call(transactions.end, begun(None), commit=False, answers=[cf.Ok()]).requests == [
        cf.Abort(tx_id=3)
    ]


def test_a_commit_after_a_failed_send_aborts_and_raises_the_sends_error() -> None:
    state = begun(None)
    state.fail(NOT_FOUND, "queue 'q' does not exist")
    with pytest.raises(QueueNotFound, match="aborted because a send in it failed: queue 'q'"):
        run_call(transactions.end, state, commit=True, answers=[cf.Ok()])


def test_ending_twice_sends_nothing() -> None:
    state = begun(None)
    run_call(transactions.end, state, commit=False, answers=[cf.Ok()])
    with pytest.raises(TransactionNotFound, match="already ended"):
        run_call(transactions.end, state, commit=True)


def test_a_broken_connection_is_the_outcome_of_an_end() -> None:
    proto = new_protocol()
    proto.fail("it broke")
    with pytest.raises(ConnectionLost, match="it broke"):
        run_call(transactions.end, begun(None), commit=True, proto=proto)
    # The abort of a commit whose send had failed: the daemon aborts it anyway.
    state = begun(None)
    state.fail(NOT_FOUND, "queue 'q' does not exist")
    with pytest.raises(QueueNotFound, match="aborted because a send"):
        run_call(transactions.end, state, commit=True, proto=proto)


def test_an_abort_of_a_prepared_transaction_committed_meanwhile() -> None:
    state = begun()
    run_call(transactions.prepare, state, answers=[cf.Ok()])
    committed = error(cf.ErrorCode.TRANSACTION_COMMITTED, "transaction 'x' was committed")
    with pytest.raises(TransactionCommitted, match="was committed"):
        run_call(transactions.end, state, commit=False, answers=[committed])
