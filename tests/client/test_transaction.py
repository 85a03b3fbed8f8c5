"""A transaction's state on the client: what it allows next, what it packs, what its end raises."""

from __future__ import annotations

import pytest
from client_kit import NOT_FOUND, frames

from qmgr.client import (
    ConnectionLost,
    InvalidArgument,
    QueueNotFound,
    ShuttingDown,
    TransactionAborted,
    TransactionNotFound,
    TransactionUsageError,
)
from qmgr.client._transaction import (
    TransactionHandle,
    TransactionState,
    check_xid,
    earlier_failure,
    prepare_interrupted,
    prepared,
    receive_abandoned,
    transaction_ended,
)
from wire import client as cf


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
def test_invalid_xids_are_refused(xid: object, match: str) -> None:
    with pytest.raises(InvalidArgument, match=match):
        check_xid(xid)
    with pytest.raises(InvalidArgument, match=match):
        TransactionState(1, xid)  # type: ignore[arg-type]
    assert check_xid("x" * 200) == "x" * 200
    assert check_xid("\u00e9" * 100) == "\u00e9" * 100


@pytest.mark.parametrize(
    "xid", ["zw\u200bNNN", "nb\u00a0sp", "line\u2028sep", "bidi\u202emark", "\ue000private"]
)
def test_a_new_xid_must_print_but_one_of_an_earlier_release_can_be_resolved(xid: str) -> None:
    # Shown with escapes (`qmgr tx list`), such an id could not be typed back
    # as it is shown: no transaction takes one now.
    with pytest.raises(InvalidArgument, match="which does not print"):
        TransactionState(1, xid)
    with pytest.raises(InvalidArgument, match="which does not print"):
        check_xid(xid, new=True)
    assert check_xid(xid) == xid  # a Resolve still names it
    assert TransactionState(1, "spaces and \u00e9 print") is not None


def test_begin_and_end_frames() -> None:
    out = bytearray()
    TransactionState(4).pack_begin(out, 1)
    TransactionState(5, "g").pack_begin(out, 2)
    plain = TransactionState(4)
    plain.end(commit=True)
    plain.pack_end(out, 3)
    assert frames(out) == [
        (1, cf.Begin(tx_id=4)),
        (2, cf.BeginGlobal(tx_id=5, xid="g")),
        (3, cf.Commit(tx_id=4)),
    ]


def test_the_first_failure_is_kept_and_raised_by_every_later_call() -> None:
    state = TransactionState(2)
    assert state.phase == "open"
    state.fail(NOT_FOUND, "queue 'q' does not exist")
    state.fail(int(cf.ErrorCode.INVALID_NAME), "second")
    assert (state.failed, state.phase) == (True, "failed")
    for _ in range(2):
        with pytest.raises(
            QueueNotFound, match="a send in transaction 2 failed, so it cannot commit"
        ):
            state.check()


def test_a_failed_begin_says_so() -> None:
    state = TransactionState(2, "used")
    state.request_ids.append(9)
    state.fail(int(cf.ErrorCode.INVALID_ARGUMENT), "in use", state.request_name(9))
    with pytest.raises(InvalidArgument, match="transaction 'used' could not begin: in use"):
        state.check()


@pytest.mark.parametrize(
    ("commit", "failed", "outcome", "raised"),
    [
        (True, False, cf.Ok(), None),
        (True, False, ShuttingDown("stopping"), ShuttingDown),
        (True, False, cf.NoMessage(), ConnectionLost),  # not Ok: a protocol error
        (False, False, cf.Ok(), None),
        (False, False, TransactionNotFound("gone"), None),
        (False, True, TransactionNotFound("gone"), None),
        (False, False, ConnectionLost("lost"), ConnectionLost),
        (False, False, ShuttingDown("stopping"), ShuttingDown),
        (True, True, ConnectionLost("lost"), QueueNotFound),  # the daemon aborts it anyway
        (True, True, ShuttingDown("stopping"), ShuttingDown),
        (True, True, cf.Ok(), QueueNotFound),
    ],
)
def test_what_commit_and_abort_raise(
    commit: bool,
    failed: bool,
    outcome: cf.ServerReply | Exception,
    raised: type[Exception] | None,
) -> None:
    state = TransactionState(1)
    if failed:
        state.fail(NOT_FOUND, "queue 'q' does not exist")
    state.end(commit=commit)
    assert state.ended
    if raised is None:
        transaction_ended(state, outcome)  # type: ignore[arg-type]
    else:
        with pytest.raises(raised):
            transaction_ended(state, outcome)  # type: ignore[arg-type]


def test_a_prepared_transaction_ends_by_xid() -> None:
    state = TransactionState(3, "x")
    prepared(state, cf.Ok())
    with pytest.raises(TransactionUsageError, match="'x' is prepared: only commit"):
        state.check()
    state.end(commit=True)
    out = bytearray()
    state.pack_end(out, 7)
    assert frames(out) == [(7, cf.Resolve(commit=True, xids=("x",)))]
    transaction_ended(state, cf.Resolutions(outcomes=(1,)))
    lost = TransactionState(4, "y")
    prepared(lost, cf.Ok())
    lost.end(commit=False)
    with pytest.raises(ConnectionLost, match="prepared transaction 'y' may still be in doubt"):
        transaction_ended(lost, ConnectionLost("gone"))


def test_a_prepare_the_daemon_aborted_has_ended() -> None:
    state = TransactionState(3, "x")
    with pytest.raises(TransactionAborted):
        prepared(state, TransactionAborted("timed out"))
    assert state.ended


def test_an_interrupted_prepare_leaves_only_abort() -> None:
    state = TransactionState(3, "x")
    prepare_interrupted(state)
    assert not state.prepared
    with pytest.raises(TransactionAborted, match="the prepare in transaction 'x' failed"):
        state.check()
    state.end(commit=True)  # becomes an abort
    assert state.phase == "ended"
    with pytest.raises(ConnectionLost, match="'x' may be prepared and in doubt"):
        transaction_ended(state, ConnectionLost("gone"))


def test_a_prepare_lost_with_the_connection_may_have_happened() -> None:
    state = TransactionState(3, "x")
    with pytest.raises(ConnectionLost, match="'x' may have been prepared"):
        prepared(state, ConnectionLost("the connection failed"))


def test_an_abandoned_receive_leaves_only_abort() -> None:
    state = TransactionState(8)
    receive_abandoned(state)
    with pytest.raises(TransactionAborted, match="a receive in transaction 8 failed"):
        state.check()
    state.end(commit=True)
    with pytest.raises(TransactionAborted, match="aborted because a receive in it failed"):
        transaction_ended(state, cf.Ok())


def test_a_receive_the_daemon_refused_is_what_the_commit_names() -> None:
    state = TransactionState(9)
    refused = TransactionUsageError(
        "queue 'n' is not transactional", code=cf.ErrorCode.TRANSACTION_USAGE
    )
    earlier_failure(state, refused)  # nothing earlier: it is recorded, not raised
    # A send after it is refused by the daemon as doomed; the receive stays the cause.
    state.fail(int(cf.ErrorCode.TRANSACTION_USAGE), "transaction 9 can only abort: ...")
    state.end(commit=True)
    with pytest.raises(
        TransactionUsageError,
        match="transaction 9 was aborted because a receive in it failed: queue 'n' is not",
    ):
        transaction_ended(state, cf.Ok())


def test_the_handle_shows_the_state() -> None:
    class Handle(TransactionHandle):
        __slots__ = ()

    handle = Handle(TransactionState(6, "g"))
    assert (handle.id, handle.xid, handle.ended, handle.prepared) == (6, "g", False, False)
    assert repr(handle) == "<Handle 6 (open)>"
    handle._state.prepared = True
    assert handle.prepared
    handle._state.ended = True
    assert not handle.prepared
    assert repr(handle) == "<Handle 6 (ended)>"
