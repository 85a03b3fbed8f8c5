"""Global (two-phase) transactions and queue ranges: the SDK's values, checks and replies.

A *global* transaction is one begun with an xid, a name the application
chooses (``qm.begin(xid="...")``). Besides committing or aborting it like
any other, its owner may *prepare* it: the daemon then stores it, in doubt,
and it belongs to no connection any more. It survives disconnects and
restarts until someone commits or aborts it by xid, from any connection
(:meth:`QueueManager.commit_prepared`, ``qmgr tx commit``). The daemon keeps
the outcome of a resolved global transaction for a while
(``transactions.outcome_retention``), so a coordinator that failed half-way
can resolve again and learn what had happened (:class:`Resolution`).

These are protocol version 3 requests: against an older daemon every call
here raises :class:`NotSupported` before anything is sent.

This module is pure (no I/O) and shared by the blocking and the trio client:
the public values, the checks of arguments, and the conversion of replies.
"""

from __future__ import annotations

import enum
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from wire import client_frames as cf
from wire.client_frames import Resolution

from . import _common as common
from ._errors import ConnectionLost, InvalidArgument
from ._replies import unexpected

__all__ = [
    "MAX_XID_BYTES",
    "RangeInfo",
    "Resolution",
    "TransactionInfo",
    "TransactionStatus",
    "check_xid",
    "list_request",
    "range_info",
    "require_two_phase",
    "resolutions",
    "resolve_request",
    "transaction_list",
]

#: Longest xid, in bytes of UTF-8.
MAX_XID_BYTES: Final = 200

_RESOLUTIONS: Final = {int(r): r for r in Resolution}


class TransactionStatus(enum.StrEnum):
    """What has become of a global transaction that :meth:`QueueManager.transactions` lists."""

    #: Prepared and in doubt: it waits for ``commit_prepared()`` or ``abort_prepared()``.
    PREPARED = "prepared"
    #: Committed; the daemon keeps this outcome for ``transactions.outcome_retention``.
    COMMITTED = "committed"
    #: Aborted; the daemon keeps this outcome for ``transactions.outcome_retention``.
    ABORTED = "aborted"


_STATUSES: Final = {
    int(cf.TransactionState.PREPARED): TransactionStatus.PREPARED,
    int(cf.TransactionState.COMMITTED): TransactionStatus.COMMITTED,
    int(cf.TransactionState.ABORTED): TransactionStatus.ABORTED,
}


@dataclass(frozen=True, slots=True, kw_only=True)
class TransactionInfo:
    """A prepared global transaction, or the kept outcome of a resolved one.

    Attributes:
        xid: the transaction's global id.
        state: prepared (in doubt), committed or aborted.
        since: unix seconds: when it was prepared, or when it was resolved.
        sends: messages it sends when committed (0 for an outcome).
        receives: messages it received, held until it is resolved (0 for an outcome).
        bytes: bytes of the message bodies it sends (0 for an outcome).
    """

    xid: str
    state: TransactionStatus
    since: float
    sends: int
    receives: int
    bytes: int

    @property
    def age(self) -> float:
        """Seconds since :attr:`since`, by this machine's clock (never negative)."""
        return max(0.0, time.time() - self.since)

    @classmethod
    def from_wire(cls, data: cf.TransactionInfo) -> TransactionInfo:
        """Convert the protocol's value.

        Raises:
            ConnectionLost: an unknown state (a protocol error).
        """
        state = _STATUSES.get(data.state)
        if state is None:
            msg = f"protocol error: unknown transaction state {data.state} for {data.xid!r}"
            raise ConnectionLost(msg)
        return cls(
            xid=data.xid,
            state=state,
            since=data.since,
            sends=data.sends,
            receives=data.receives,
            bytes=data.bytes,
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class RangeInfo:
    """What :meth:`QueueManager.measure_range` found.

    Attributes:
        queue_id: the queue's id in the store. A queue deleted and created
            again under the same name gets a new one, so a reader that keeps
            lookup ids can tell that its position no longer means anything.
        count: visible messages counted (messages held by open or prepared
            transactions are not).
        last: the lookup id of the last message counted, or ``after`` if none was.
    """

    queue_id: int
    count: int
    last: int


# --------------------------------------------------------------------------
# Checks
# --------------------------------------------------------------------------


def check_xid(xid: object) -> str:
    """Return ``xid`` if it can name a global transaction.

    Raises:
        InvalidArgument: not a str of 1 to 200 bytes of UTF-8 without control characters.
    """
    if not isinstance(xid, str):
        msg = f"a transaction id (xid) must be a str, not {type(xid).__name__}"
        raise InvalidArgument(msg)
    try:
        size = len(xid.encode("utf-8"))
    except UnicodeEncodeError:
        msg = f"transaction id {xid!r} cannot be encoded as UTF-8"
        raise InvalidArgument(msg) from None
    if not 0 < size <= MAX_XID_BYTES:
        msg = f"a transaction id must be 1 to {MAX_XID_BYTES} bytes of UTF-8, not {size}: {xid!r}"
        raise InvalidArgument(msg)
    for char in xid:
        if char < " " or char == "\x7f":
            msg = f"transaction id {xid!r} contains the control character U+{ord(char):04X}"
            raise InvalidArgument(msg)
    return xid


def require_two_phase(version: int, address: str, what: str) -> None:
    """Raise unless the connection's protocol version has global transactions and ranges.

    Raises:
        NotSupported: the daemon is older than these requests.
    """
    common.require_version(
        version,
        cf.TWO_PHASE_VERSION,
        address,
        what,
        "global transactions, remove_through() and measure_range()",
    )


def resolve_request(xids: Sequence[str], *, commit: bool) -> cf.Resolve | None:
    """The Resolve request for ``xids``, or None if there are none.

    Raises:
        InvalidArgument: ``xids`` is a str, an xid is not valid, or there
            are more than 10000.
    """
    if isinstance(xids, str | bytes):
        msg = f"expected a sequence of transaction ids, not a single {type(xids).__name__}"
        raise InvalidArgument(msg)
    checked = tuple(check_xid(xid) for xid in xids)
    if len(checked) > cf.MAX_RESOLVE_XIDS:
        count = len(checked)
        msg = f"at most {cf.MAX_RESOLVE_XIDS} transactions can be resolved at once, not {count}"
        raise InvalidArgument(msg)
    return cf.Resolve(commit=commit, xids=checked) if checked else None


def list_request(prefix: str, resolved: bool, limit: int) -> cf.ListTransactions:
    """The ListTransactions request of ``transactions()``.

    Raises:
        InvalidArgument: ``limit`` is not 0..2**32-1.
    """
    if not 0 <= limit <= 0xFFFFFFFF:
        msg = f"limit must be from 0 to {0xFFFFFFFF}, not {limit!r}"
        raise InvalidArgument(msg)
    return cf.ListTransactions(prefix=prefix, resolved=bool(resolved), max_count=limit)


# --------------------------------------------------------------------------
# Replies
# --------------------------------------------------------------------------


def resolutions(reply: cf.ServerReply, count: int) -> list[Resolution]:
    """The resolutions of a ``Resolutions`` reply to a Resolve of ``count`` xids."""
    if type(reply) is not cf.Resolutions:
        raise unexpected(reply, "Resolutions")
    found = [_RESOLUTIONS.get(value) for value in reply.outcomes]
    if len(found) != count or None in found:
        msg = (
            f"protocol error: the queue manager answered {reply.outcomes!r} "
            f"to the resolution of {count} transactions"
        )
        raise ConnectionLost(msg)
    return found  # type: ignore[return-value]


def transaction_list(reply: cf.ServerReply) -> list[TransactionInfo]:
    """The transactions of a ``TransactionList`` reply."""
    if type(reply) is not cf.TransactionList:
        raise unexpected(reply, "TransactionList")
    return [TransactionInfo.from_wire(t) for t in reply.transactions]


def range_info(reply: cf.ServerReply) -> RangeInfo:
    """The measure of a ``RangeInfo`` reply."""
    if type(reply) is not cf.RangeInfo:
        raise unexpected(reply, "RangeInfo")
    return RangeInfo(queue_id=reply.queue_id, count=reply.count, last=reply.last)
