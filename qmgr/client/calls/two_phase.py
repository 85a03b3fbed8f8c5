"""Global (two-phase) transactions: resolving and listing prepared transactions by xid.

A *global* transaction is one begun with an xid, a name the application
chooses (``qm.begin(xid="...")``). Besides committing or aborting it like
any other, its owner may *prepare* it (``calls/transactions.py``): the
daemon then stores it, in doubt, and it belongs to no connection any more.
It survives disconnects and restarts until someone commits or aborts it by
xid, from any connection (:meth:`QueueManager.commit_prepared`, ``qmgr tx
commit``). The daemon keeps the outcome of a resolved global transaction for
a while (``transactions.outcome_retention``), so a coordinator that failed
half-way can resolve again and learn what had happened (:class:`Resolution`).

These requests need the protocol's ``TWO_PHASE_VERSION``: against an older
daemon every call here raises :class:`NotSupported` before anything is sent.
"""

from __future__ import annotations

import enum
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from wire import client as cf
from wire.client import Resolution

from .._codec import check_range
from .._common import TWO_PHASE_USE
from .._exceptions import ConnectionLost, InvalidArgument
from .._protocol import ClientProtocol, Flow, W
from .._replies import expect, resolutions
from .._transaction import check_xid

__all__ = [
    "Resolution",
    "TransactionInfo",
    "TransactionStatus",
    "abort_prepared",
    "abort_prepared_all",
    "commit_prepared",
    "commit_prepared_all",
    "list_request",
    "resolve_request",
    "transactions",
]


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


# --------------------------------------------------------------------------
# Requests
# --------------------------------------------------------------------------


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
    check_range("limit", limit, 0xFFFFFFFF)
    return cf.ListTransactions(prefix=prefix, resolved=bool(resolved), max_count=limit)


# --------------------------------------------------------------------------
# Calls
# --------------------------------------------------------------------------


def _resolve(
    proto: ClientProtocol[W], what: str, xids: Sequence[str], *, commit: bool
) -> Flow[W, list[Resolution]]:
    request = resolve_request(xids, commit=commit)
    if request is None:
        return []  # nothing to ask: not even the protocol version
    proto.require(cf.TWO_PHASE_VERSION, what, TWO_PHASE_USE)
    return resolutions((yield proto.call(request)), len(request.xids))


def commit_prepared(proto: ClientProtocol[W], xid: str) -> Flow[W, Resolution]:
    """``commit_prepared()``."""
    return (yield from _resolve(proto, "commit_prepared()", (xid,), commit=True))[0]


def abort_prepared(proto: ClientProtocol[W], xid: str) -> Flow[W, Resolution]:
    """``abort_prepared()``."""
    return (yield from _resolve(proto, "abort_prepared()", (xid,), commit=False))[0]


def commit_prepared_all(proto: ClientProtocol[W], xids: Sequence[str]) -> Flow[W, list[Resolution]]:
    """``commit_prepared_all()``: one resolution per xid, in order."""
    return (yield from _resolve(proto, "commit_prepared_all()", xids, commit=True))


def abort_prepared_all(proto: ClientProtocol[W], xids: Sequence[str]) -> Flow[W, list[Resolution]]:
    """``abort_prepared_all()``: one resolution per xid, in order."""
    return (yield from _resolve(proto, "abort_prepared_all()", xids, commit=False))


def transactions(
    proto: ClientProtocol[W], prefix: str, resolved: bool, limit: int
) -> Flow[W, list[TransactionInfo]]:
    """``transactions()``: the prepared ones by xid, then (``resolved``) the kept outcomes."""
    request = list_request(prefix, resolved, limit)
    proto.require(cf.TWO_PHASE_VERSION, "transactions()", TWO_PHASE_USE)
    listed = expect((yield proto.call(request)), cf.TransactionList)
    return [TransactionInfo.from_wire(t) for t in listed.transactions]
