"""Poison handling and subqueues: queue retry settings and moves.

A queue with *poison handling* (MSMQ 4.0, WCF netMsmq) moves a message that
keeps making its receiving transactions abort out of the way: after
``retry_count`` aborted receives it moves to the subqueue ``NAME;retry``,
comes back after ``retry_delay`` seconds for another cycle, and after
``retry_cycles`` cycles moves to ``NAME;poison``, where it stays until an
operator moves it back (``move``) or receives it. Every queue has these two
subqueues; nothing can be sent to them, but they can be peeked and received
from like any queue. Each message says how often it was aborted and moved
(``Message.abort_count``, ``move_count``, ``last_move_time``).

``move`` also takes dead letters out of ``system$;deadletter`` and
``system$;deadxact``: into an application queue named, or, with an empty
target, each back to the queue it was sent to, as ordinary messages again.

These requests need the protocol's ``POISON_VERSION``: against an older
daemon they raise :class:`NotSupported` before anything is sent.
``set_queue_properties`` also changes a queue's quota (MSMQ's
PROPID_Q_QUOTA), which needs ``QUOTA_VERSION`` the same way.
"""

from __future__ import annotations

import datetime as _dt
import math
from dataclasses import dataclass
from typing import Final

from wire import client as cf

from .._exceptions import InvalidArgument, QueueError
from .._protocol import ClientProtocol, Flow, W
from .._replies import expect
from .._transaction import TransactionState, earlier_failure

__all__ = [
    "POISON_USE",
    "QUOTA_USE",
    "MoveResult",
    "Seconds",
    "move",
    "seconds",
    "set_queue_properties",
    "transaction_move",
]

#: Seconds: a number or a ``datetime.timedelta``.
Seconds = float | _dt.timedelta

#: What the requests of ``POISON_VERSION`` give (``NotSupported`` names it).
POISON_USE: Final = "poison handling and subqueues"

#: What ``QUOTA_VERSION`` gives (``NotSupported`` names it).
QUOTA_USE: Final = "quota changes in place"

_HANDLING: Final = {
    None: cf.PoisonHandling.UNCHANGED,
    True: cf.PoisonHandling.ON,
    False: cf.PoisonHandling.OFF,
}


@dataclass(frozen=True, slots=True)
class MoveResult:
    """What a move did.

    Attributes:
        count: messages moved.
        lookup_id: the lookup id the last one got in its new queue; ``None``
            if none moved, or in a transaction (its commit gives it).
    """

    count: int
    lookup_id: int | None


def seconds(value: Seconds | None) -> float | None:
    """``retry_delay`` as seconds (None stays None).

    Raises:
        InvalidArgument: neither a number nor a ``timedelta`` (or NaN).
    """
    if value is None:
        return None
    number = value.total_seconds() if isinstance(value, _dt.timedelta) else value
    if isinstance(number, bool) or not isinstance(number, int | float) or math.isnan(number):
        msg = f"retry_delay must be seconds (a number or a timedelta), not {value!r}"
        raise InvalidArgument(msg)
    return float(number)


def _move_request(
    tx_id: int, source: str, target: str, lookup_id: int | None, all_: bool
) -> cf.MoveMessages:
    if all_ and lookup_id is not None:
        msg = "give lookup_id or all=True, not both"
        raise InvalidArgument(msg)
    return cf.MoveMessages(
        tx_id=tx_id,
        source=source,
        target=target,
        lookup_id=0 if lookup_id is None else lookup_id,
        all=all_,
    )


def _moved(reply: cf.ServerReply) -> MoveResult:
    moved = expect(reply, cf.Moved)
    return MoveResult(moved.count, moved.lookup_id if moved.count and moved.lookup_id else None)


def set_queue_properties(
    proto: ClientProtocol[W],
    name: str,
    retry: tuple[int | None, int | None, Seconds | None],
    poison_handling: bool | None,
    quota: int | None = None,
    no_quota: bool = False,
) -> Flow[W, None]:
    """``set_queue_properties()``; ``retry``: its ``retry_count``, ``retry_cycles`` and
    ``retry_delay``.

    Raises:
        InvalidArgument: ``poison_handling`` not None, True or False, or both
            ``quota`` and ``no_quota``.
        NotSupported: the daemon is older than ``POISON_VERSION``, or than
            ``QUOTA_VERSION`` for a quota change.
    """
    retry_count, retry_cycles, retry_delay = retry
    handling = _HANDLING.get(poison_handling)
    if handling is None:
        msg = f"poison_handling must be None, True or False, not {poison_handling!r}"
        raise InvalidArgument(msg)
    if no_quota and quota is not None:
        msg = "give quota or no_quota=True, not both"
        raise InvalidArgument(msg)
    request = cf.SetQueueProperties(
        name=name,
        poison=handling,
        retry_count=retry_count,
        retry_cycles=retry_cycles,
        retry_delay=seconds(retry_delay),
        quota=quota,
        no_quota=bool(no_quota),
    )
    if request.changes_quota:
        proto.require(cf.QUOTA_VERSION, "set_queue_properties(quota=)", QUOTA_USE)
    else:
        proto.require(cf.POISON_VERSION, "set_queue_properties()", POISON_USE)
    yield proto.call(request)


def move(
    proto: ClientProtocol[W], from_queue: str, to_queue: str, lookup_id: int | None, all_: bool
) -> Flow[W, MoveResult]:
    """``QueueManager.move()``."""
    request = _move_request(0, from_queue, to_queue, lookup_id, all_)
    proto.require(cf.POISON_VERSION, "move()", POISON_USE)
    return _moved((yield proto.call(request)))


def transaction_move(
    proto: ClientProtocol[W],
    state: TransactionState,
    from_queue: str,
    to_queue: str,
    lookup_id: int | None,
) -> Flow[W, bool]:
    """``Transaction.move()``: whether a message was there to move."""
    proto.require(cf.POISON_VERSION, "Transaction.move()", POISON_USE)
    state.check()
    request = _move_request(state.id, from_queue, to_queue, lookup_id, False)
    try:
        reply = yield proto.call(request)
    except QueueError as exc:
        earlier_failure(state, exc, "a move")
        raise
    result = _moved(reply)
    state.check()
    return result.count > 0
