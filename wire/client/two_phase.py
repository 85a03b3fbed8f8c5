"""The client protocol's frames for global (two-phase) transactions and queue ranges.

A global transaction is an internal one with a name, its *xid*, chosen by
the client (:class:`BeginGlobal`). It may be prepared (:class:`Prepare`):
then it is stored, in doubt, and survives disconnects and restarts until a
:class:`Resolve` commits or aborts it by xid, from any connection.
:class:`ListTransactions` shows the ones in doubt and the outcomes the daemon
keeps, so that a coordinator that failed can find out what happened.
:class:`RemoveThrough` and :class:`MeasureRange` let a reader that keeps its
own position (a LookupId) consume and measure a queue by ranges.

These requests are answered only on a connection that negotiated
``TWO_PHASE_VERSION`` or later (see :mod:`wire.client.constants`).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Final

from ..text_fields import quoted

#: Most transaction ids one ``Resolve`` may name.
MAX_RESOLVE_XIDS: Final = 10_000
#: The longest transaction id (xid), in bytes of UTF-8.
MAX_XID_BYTES: Final = 200


def xid_error(xid: object, *, new: bool = False) -> str | None:
    """Why ``xid`` cannot name a global transaction (None: it can): it must be a
    str of 1 to :data:`MAX_XID_BYTES` bytes of UTF-8 without control characters.
    The one rule of the client, the daemon and the command line.

    ``new``: for a transaction being begun, every character must also print
    (``str.isprintable``: no format characters, no spaces other than U+0020,
    no line or paragraph separators), so that the id is shown, and can be
    typed back, as it is. Ids of earlier releases that do not print can still
    be resolved (shown with Python's escapes)."""
    if not isinstance(xid, str):
        return f"a transaction id (xid) must be a str, not {type(xid).__name__}"
    try:
        size = len(xid.encode("utf-8"))
    except UnicodeEncodeError:
        return f"transaction id {quoted(xid)} is not valid Unicode text: UTF-8 cannot encode it"
    if not 0 < size <= MAX_XID_BYTES:
        shown = f": {quoted(xid)}" if xid else ""
        return f"a transaction id must be 1 to {MAX_XID_BYTES} bytes of UTF-8, not {size}{shown}"
    for char in xid:
        if char < " " or char == "\x7f":
            return f"transaction id {quoted(xid)} contains the control character U+{ord(char):04X}"
        if new and not char.isprintable():
            return (
                f"transaction id {quoted(xid)} contains U+{ord(char):04X}, which does not "
                "print: a transaction id must show as it is typed"
            )
    return None


class Resolution(enum.IntEnum):
    """What committing or aborting a prepared (global) transaction by its xid did."""

    COMMITTED = 1  #: it was prepared and is committed now
    ALREADY_COMMITTED = 2  #: it had been committed before (a repeated commit)
    ABORTED = 3  #: it was prepared and is aborted now
    ALREADY_ABORTED = 4  #: it had been aborted before (a repeated abort)


class TransactionState(enum.IntEnum):
    """The state of a global transaction in a :class:`TransactionInfo`."""

    PREPARED = 1  #: prepared and in doubt: waiting for a commit or an abort
    COMMITTED = 2  #: an outcome kept after the commit
    ABORTED = 3  #: an outcome kept after the abort


@dataclass(frozen=True, slots=True, kw_only=True)
class BeginGlobal:
    """Open a global transaction: an internal one named by ``xid``, which it may prepare.

    ``xid`` is chosen by the client: 1..200 bytes of UTF-8 without control
    characters, unique among open, prepared and recently resolved
    transactions. ``tx_id`` is as for :class:`Begin` (0: the daemon chooses
    and replies ``Ok(value=id)``; else answered only if it fails).
    """

    tx_id: int = 0
    xid: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Prepare:
    """Prepare a global transaction: store it, in doubt, until a :class:`Resolve`.

    The reply (``Ok``) comes after the store has synced. From then on the
    transaction belongs to no connection: it survives disconnects and
    restarts, and only a :class:`Resolve` naming its xid ends it.
    """

    tx_id: int


@dataclass(frozen=True, slots=True, kw_only=True)
class Resolve:
    """Commit (or abort) prepared transactions by xid, all or none, in one synced unit.

    The reply is :class:`Resolutions`; an error reply names the xid that
    failed, and then none was resolved. At most ``MAX_RESOLVE_XIDS`` xids.
    """

    commit: bool
    xids: tuple[str, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class ListTransactions:
    """Ask for the prepared transactions (and, with ``resolved``, the kept outcomes).

    Only those whose xid starts with ``prefix``, in xid order, at most
    ``max_count`` prepared ones and ``max_count`` outcomes (the daemon may
    cap both, and answers no more outcomes than fit in one frame).
    """

    prefix: str = ""
    resolved: bool = False
    max_count: int = 1000


@dataclass(frozen=True, slots=True, kw_only=True)
class RemoveThrough:
    """Remove every visible message of ``queue`` with a LookupId up to ``lookup_id``.

    The reply is ``Ok(value=messages removed)``. Messages held by open
    transactions are left where they are.
    """

    queue: str
    lookup_id: int


@dataclass(frozen=True, slots=True, kw_only=True)
class MeasureRange:
    """Count the visible messages of ``queue`` with a LookupId above ``after``.

    At most ``max_count`` are counted (0: all of them). The reply is
    :class:`RangeInfo`.
    """

    queue: str
    after: int = 0
    max_count: int = 0


# --------------------------------------------------------------------------
# Replies
# --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class Resolutions:
    """The answer to :class:`Resolve`: one :class:`Resolution` value per xid, in order."""

    outcomes: tuple[int, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class TransactionInfo:
    """A prepared global transaction, or the kept outcome of a resolved one."""

    xid: str
    #: A :class:`TransactionState` value.
    state: int
    #: Unix seconds: when it was prepared, or when it was resolved.
    since: float
    #: Messages it sends (0 for an outcome).
    sends: int
    #: Messages it received (0 for an outcome).
    receives: int
    #: Bytes of the messages it sends (0 for an outcome).
    bytes: int


@dataclass(frozen=True, slots=True, kw_only=True)
class TransactionList:
    """The answer to :class:`ListTransactions`: the prepared ones, then the outcomes, by xid."""

    transactions: tuple[TransactionInfo, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class RangeInfo:
    """The answer to :class:`MeasureRange`.

    ``count`` visible messages were counted; ``last`` is the LookupId of the
    last one counted (``after`` if none was). ``queue_id`` is the queue's
    id in the store, which no other queue ever gets.
    """

    queue_id: int
    count: int
    last: int


#: The requests a daemon answers only on a connection of ``TWO_PHASE_VERSION`` or later.
TWO_PHASE_REQUESTS: Final[frozenset[type[object]]] = frozenset(
    {BeginGlobal, Prepare, Resolve, ListTransactions, RemoveThrough, MeasureRange}
)
