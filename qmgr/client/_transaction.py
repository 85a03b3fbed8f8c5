"""A transaction on the client: its state, how it begins, is prepared and ends.

Theory of operation
-------------------
Both transaction classes keep a :class:`TransactionState` (and show it
through their base, :class:`TransactionHandle`); the protocol core, the
calls of ``calls/transactions.py`` and the two clients decide everything
about a transaction through it:

* ``begin()`` packs a Begin, or with an xid a BeginGlobal
  (:meth:`TransactionState.pack_begin`); both are pipelined.
* Sends are pipelined: a failure among them is recorded by
  :meth:`TransactionState.fail` and raised by the next call
  (:meth:`TransactionState.check`).
* ``prepare()`` packs the Prepare of a global transaction
  (``ClientProtocol.prepare_request``) and :func:`prepared` judges its
  reply: after a success only ``commit()`` and ``abort()`` may follow; a
  failure leaves a transaction that can only abort.
* :meth:`TransactionState.end` records whether ``commit()`` or ``abort()``
  ended it (a commit of a transaction with a failed send sends an Abort
  instead); :meth:`TransactionState.pack_end` packs that frame (a Resolve
  naming the xid once the transaction is prepared: it no longer belongs to
  the connection); :func:`transaction_ended` turns its reply, or the error
  the client met, into what ``commit()`` or ``abort()`` raises.
* A Prepare whose reply was never read (a cancelled wait) may have been
  done: the transaction may be prepared, or still open on the connection.
  Ending it then sends both an Abort and, after it, a Resolve that aborts
  the xid (the daemon handles a connection's requests in order), so that it
  is aborted whichever way the Prepare went (:func:`prepare_interrupted`).
  A receive whose reply was never read may have taken a message: the
  transaction can then only abort (:func:`receive_abandoned`).

Nothing here does I/O or knows the protocol core: the core packs what this
module decides.
"""

from __future__ import annotations

import enum
from typing import Final, TypeVar

from wire import client as cf

from ._codec import ABORT, BEGIN, COMMIT, append_tx_request
from ._common import ReadThrough
from ._exceptions import (
    ConnectionLost,
    InvalidArgument,
    QueueError,
    TransactionAborted,
    TransactionNotFound,
    TransactionUsageError,
    error_from_reply,
)
from ._replies import resolutions, unexpected

__all__ = [
    "ABORTED_BY_DAEMON",
    "Ending",
    "TransactionHandle",
    "TransactionState",
    "abort_on_exit",
    "check_xid",
    "earlier_failure",
    "prepare_interrupted",
    "prepared",
    "receive_abandoned",
    "transaction_ended",
]

T = TypeVar("T")


class Ending(enum.Enum):
    """How a transaction ended (``TransactionState.ending``).

    Once it is prepared, a Resolve naming its xid is sent instead of a
    Commit or an Abort.
    """

    OPEN = enum.auto()  #: still open
    COMMIT = enum.auto()  #: by commit(), which sends a Commit
    ABORT = enum.auto()  #: by abort(), which sends an Abort
    #: by a commit() after a failed send, which sends an Abort and raises the send's error
    ABORT_FAILED = enum.auto()


#: What :meth:`TransactionState.fail` records when the pipelined Begin failed.
_THE_BEGIN: Final = "its begin"
#: What failed, when the daemon had aborted the transaction itself (an idle
#: timeout, say): its message says so, and no request of the client is to blame.
ABORTED_BY_DAEMON: Final = "the queue manager"


def check_xid(xid: object, *, new: bool = False) -> str:
    """Return ``xid`` if it can name a global transaction (``new``: one being begun).

    Raises:
        InvalidArgument: not a str of 1 to 200 bytes of UTF-8 without control
            characters, or (``new``) with a character that does not print
            (``wire.client.xid_error`` says which).
    """
    error = cf.xid_error(xid, new=new)
    if error is not None:
        raise InvalidArgument(error)
    assert isinstance(xid, str)
    return xid


class TransactionState:
    """What both transaction classes track: the id, whether it ended, a pipelined failure.

    A transactional send is pipelined: its reply is read later. When a reply
    says the send failed, :meth:`fail` records the first such error; every
    later call on the transaction raises it (:meth:`check`), and ``commit()``
    aborts instead of committing.
    """

    __slots__ = (
        "_error",
        "_failed_request",
        "ended",
        "ending",
        "id",
        "prepared",
        "request_ids",
        "unsure",
        "xid",
    )

    def __init__(self, tx_id: int, xid: str | None = None) -> None:
        """Raises InvalidArgument if ``xid`` cannot name a global transaction."""
        #: The transaction's id (chosen by the client).
        self.id = tx_id
        #: The global transaction id given to ``begin()``, or None.
        self.xid = None if xid is None else check_xid(xid, new=True)
        self.ended = False
        #: True once prepared: then only a commit or an abort by xid can follow.
        self.prepared = False
        #: True when the reply to its Prepare was never read: it may be prepared.
        self.unsure = False
        #: How it ended: open, by commit(), by abort(), or by a commit() that aborted.
        self.ending = Ending.OPEN
        #: Ids of its pipelined requests, answered only if they fail.
        self.request_ids: list[int] = []
        self._error: tuple[int, str] | None = None
        self._failed_request = "a send"

    @property
    def label(self) -> str:
        """How messages name the transaction: its xid (quoted) if it has one, else its id."""
        return str(self.id) if self.xid is None else repr(self.xid)

    @property
    def failed(self) -> bool:
        """True once a request of this transaction has failed (a pipelined send, a
        receive the daemon refused): it can only abort."""
        return self._error is not None

    @property
    def failed_request(self) -> str | None:
        """What failed first (``a send``, ``a receive``, ...), or None."""
        return None if self._error is None else self._failed_request

    @property
    def phase(self) -> str:
        """``ended``, ``prepared``, ``failed`` or ``open``, for the transaction classes' repr."""
        if self.ended:
            return "ended"
        return "prepared" if self.prepared else "failed" if self._error is not None else "open"

    def request_name(self, request_id: int) -> str:
        """What the pipelined request ``request_id`` of this transaction was, for messages."""
        request_ids = self.request_ids
        return _THE_BEGIN if request_ids and request_ids[0] == request_id else "a send"

    def fail(self, code: int, message: str, what: str = "a send") -> None:
        """Record a failed pipelined send, or ``what`` else failed (the first one wins);
        a refusal because the daemon had aborted the transaction is the daemon's
        (:data:`ABORTED_BY_DAEMON`), whatever request met it."""
        if code == cf.ErrorCode.TRANSACTION_ABORTED and what in ("a send", _THE_BEGIN):
            what = ABORTED_BY_DAEMON
        if self._error is None:
            self._error = (code, message)
            self._failed_request = what

    def error(self, prefix: str = "") -> QueueError:
        """The recorded failure as an exception (a fresh one each time)."""
        assert self._error is not None
        code, message = self._error
        return error_from_reply(code, prefix + message)

    def check(self) -> None:
        """Raise if the transaction ended, is prepared, or a pipelined send failed."""
        if self.ended:
            msg = f"transaction {self.label} has already ended"
            raise TransactionNotFound(msg)
        if self.prepared:
            msg = f"transaction {self.label} is prepared: only commit() or abort() can follow"
            raise TransactionUsageError(msg)
        if self._error is not None:
            what = self._failed_request
            prefix = f"{what} in transaction {self.label} failed, so it cannot commit: "
            if what == _THE_BEGIN:
                prefix = f"transaction {self.label} could not begin: "
            elif what == ABORTED_BY_DAEMON:
                prefix = ""
            raise self.error(prefix)

    def check_preparable(self) -> None:
        """Raise unless the transaction can be prepared: it has an xid and :meth:`check` passes."""
        if self.xid is None:
            msg = (
                f"transaction {self.id} has no xid: only a transaction begun with "
                "begin(xid=...) can be prepared"
            )
            raise TransactionUsageError(msg)
        self.check()

    def commit_error(self) -> QueueError:
        """The error ``commit()`` raises after aborting a transaction with a failed send."""
        what = self._failed_request
        if what == _THE_BEGIN:
            return self.error(f"transaction {self.label} could not begin: ")
        if what == ABORTED_BY_DAEMON:
            return self.error()
        return self.error(f"transaction {self.label} was aborted because {what} in it failed: ")

    def end(self, *, commit: bool) -> None:
        """Mark the transaction ended by ``commit()`` or ``abort()``.

        A commit of a transaction with a failed send becomes an abort: the
        daemon would refuse it, and it must not apply part of the transaction.

        Raises:
            TransactionNotFound: it had already ended.
        """
        if self.ended:
            self.check()
        self.ended = True
        if not commit:
            self.ending = Ending.ABORT
        elif self._error is None:
            self.ending = Ending.COMMIT
        else:
            self.ending = Ending.ABORT_FAILED

    def pack_begin(self, out: bytearray, request_id: int) -> None:
        """Pack the transaction's Begin (BeginGlobal if it has an xid) into ``out``."""
        if self.xid is None:
            append_tx_request(out, BEGIN, request_id, self.id)
        else:
            out += cf.encode_frame(request_id, cf.BeginGlobal(tx_id=self.id, xid=self.xid))

    def pack_end(self, out: bytearray, request_id: int, abort_id: int = 0) -> None:
        """Pack the request that ends the transaction as :meth:`end` decided into ``out``.

        When it may be prepared (:attr:`unsure`), an Abort with ``abort_id``
        (whose reply nobody waits for) goes first, then the Resolve that
        aborts its xid with ``request_id``.
        """
        commit = self.ending == Ending.COMMIT
        if self.unsure:
            assert self.xid is not None
            assert not commit
            append_tx_request(out, ABORT, abort_id, self.id)
            out += cf.encode_frame(request_id, cf.Resolve(commit=False, xids=(self.xid,)))
        elif self.prepared:
            assert self.xid is not None
            out += cf.encode_frame(request_id, cf.Resolve(commit=commit, xids=(self.xid,)))
        else:
            append_tx_request(out, COMMIT if commit else ABORT, request_id, self.id)


class _StateField(ReadThrough[T]):
    """A read-only attribute of :class:`TransactionHandle`: a field of its state."""

    via = "_state"


class TransactionHandle:
    """What both transaction classes (``Transaction``, ``AsyncTransaction``) show of
    their :class:`TransactionState`; they add the calls."""

    __slots__ = ("_state",)

    def __init__(self, state: TransactionState) -> None:
        self._state = state

    id = _StateField[int]("The transaction's id on this connection (chosen by the client).")
    ended = _StateField[bool]("True once committed or aborted.")
    xid = _StateField[str | None]("The global transaction id given to ``begin(xid=...)``, or None.")

    @property
    def prepared(self) -> bool:
        """True once :meth:`prepare` succeeded (until the transaction ends)."""
        return self._state.prepared and not self._state.ended

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self._state.id} ({self._state.phase})>"


def _error_of(outcome: cf.ServerReply | QueueError) -> QueueError | None:
    """The error of a request answered ``Ok`` (None), by another reply (a protocol
    error), or that met ``outcome`` on its way."""
    if isinstance(outcome, QueueError):
        return outcome
    return None if type(outcome) is cf.Ok else unexpected(outcome, "Ok")


# ----------------------------------------------------------------------
# Prepare
# ----------------------------------------------------------------------


def prepared(state: TransactionState, outcome: cf.ServerReply | QueueError) -> None:
    """Take the reply to a Prepare (or the error met sending it); raise what ``prepare()`` raises.

    After a success the transaction is prepared. After a failure it can only
    abort: ``commit()`` aborts it and raises the prepare's error, except that
    a transaction the daemon aborted (a send in it failed; it timed out) has
    ended, and a lost connection says that the prepare may have happened.
    """
    error = _error_of(outcome)
    if state.failed:  # a pipelined send failed: the daemon refused the prepare and aborted
        state.ended = True
        state.ending = Ending.ABORT
        raise state.commit_error() from None
    if error is None:
        state.prepared = True
        return
    if isinstance(error, ConnectionLost):
        msg = (
            f"{error.message}; transaction {state.label} may have been prepared: "
            "look for it with transactions() and resolve it"
        )
        raise ConnectionLost(msg)
    if isinstance(error, TransactionNotFound | TransactionAborted):
        state.ended = True
        state.ending = Ending.ABORT
    else:
        state.fail(int(error.code or cf.ErrorCode.INTERNAL), error.message, what="the prepare")
    raise error


def prepare_interrupted(state: TransactionState) -> None:
    """The wait for a Prepare's reply was interrupted (cancelled): only an abort may
    follow, and it aborts the transaction whether or not the Prepare was done."""
    state.unsure = True
    state.fail(
        int(cf.ErrorCode.TRANSACTION_ABORTED),
        "it was interrupted before its reply was read, so the transaction may be prepared; "
        "abort() aborts it either way",
        what="the prepare",
    )


# ----------------------------------------------------------------------
# How a transaction ended
# ----------------------------------------------------------------------


def transaction_ended(state: TransactionState, outcome: cf.ServerReply | QueueError) -> None:
    """Raise what ``commit()`` or ``abort()`` raises, given the reply to its request.

    Args:
        state: the transaction, ended by :meth:`TransactionState.end`.
        outcome: the reply to the Commit, Abort or Resolve, or the error
            that building, sending or waiting for it raised.

    Raises:
        After a Commit: the error of a pipelined send if one failed (the
        daemon then aborted it), else the Commit's error.
        After an Abort: its error, except that the transaction was already
        gone (nothing of it was applied); after the abort of a commit()
        whose send had failed, a lost connection is no error either (the
        daemon aborts the transaction) and the send's error is raised.
        After the Resolve of a prepared transaction: its error (a commit of
        one that was aborted, an abort of one that was committed), or a lost
        connection, which leaves the transaction in doubt. After the Abort
        and Resolve of a transaction whose Prepare was interrupted: as after
        an Abort (the Resolve aborted it if it had been prepared).
    """
    if state.prepared:
        if isinstance(outcome, ConnectionLost):
            msg = f"{outcome.message}; prepared transaction {state.label} may still be in doubt"
            raise ConnectionLost(msg)
        if isinstance(outcome, QueueError):
            raise outcome
        resolutions(outcome, 1)
        return
    if state.unsure:
        if isinstance(outcome, ConnectionLost):
            msg = f"{outcome.message}; transaction {state.label} may be prepared and in doubt"
            raise ConnectionLost(msg)
        if not isinstance(outcome, QueueError):
            resolutions(outcome, 1)  # it had been prepared: aborted now
            outcome = cf.Ok()
        # TransactionNotFound: it was not prepared, and the Abort before ended it.
    error = _error_of(outcome)
    if state.ending == Ending.COMMIT:
        if state.failed:  # a send failed after all: the daemon refused the commit
            raise state.commit_error() from None
        if error is not None:
            raise error
        return
    if (
        error is not None
        and not isinstance(error, (TransactionNotFound, TransactionAborted))
        and (state.ending == Ending.ABORT or not isinstance(error, ConnectionLost))
    ):
        raise error
    if state.ending == Ending.ABORT_FAILED:
        raise state.commit_error()


def abort_on_exit(state: TransactionState, error: QueueError, raised: BaseException | None) -> None:
    """The abort at the end of a block left by ``raised`` failed with ``error``.

    The daemon aborts a transaction whose connection is gone, so the block's
    exception goes on alone; but a transaction that is, or may be, prepared
    stays in doubt, so ``raised`` (an interrupt of its ``prepare()``, say)
    carries a note of that: nothing else would tell the program.
    """
    if raised is None or not isinstance(error, ConnectionLost):
        return
    if state.prepared or state.unsure:
        raised.add_note(
            f"{error.message}: resolve it by its xid, e.g. `qmgr tx abort {state.xid}` "
            "(`qmgr tx list` lists those in doubt)"
        )


def receive_abandoned(state: TransactionState) -> None:
    """A receive in ``state`` was cancelled before its reply was read: the daemon may
    have handed it a message nobody will see, and committing would remove that
    message unseen. Only an abort may follow."""
    state.fail(
        int(cf.ErrorCode.TRANSACTION_ABORTED),
        "it was cancelled before its reply was read, and the message it may "
        "have taken must not be committed unseen",
        what="a receive",
    )


def earlier_failure(
    state: TransactionState | None, error: QueueError, what: str = "a receive"
) -> None:
    """A request (``what``) in the transaction ``state`` failed with ``error``:
    raise instead the failure of an earlier pipelined request of it, if one was
    recorded (the daemon refuses the rest of a transaction whose operation
    failed; the earlier failure is the one that says what went wrong). Else
    ``error`` is recorded as the transaction's failure, so that ``commit()``
    names it (the daemon refuses whatever follows it in the transaction). A
    transaction the daemon aborted (an idle timeout) is recorded so, and
    ``commit()`` raises that."""
    if state is None or isinstance(error, ConnectionLost):
        return
    if isinstance(error, TransactionAborted):
        state.fail(int(cf.ErrorCode.TRANSACTION_ABORTED), error.message, ABORTED_BY_DAEMON)
    state.check()
    if error.code is not None:
        state.fail(int(error.code), error.message, what)
