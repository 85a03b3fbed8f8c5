"""Poison handling and subqueues in the SDK: queue properties and moves.

A queue with *poison handling* (MSMQ 4.0, WCF netMsmq) moves a message that
keeps making its receiving transactions abort out of the way: after
``retry_count`` aborted receives it moves to the subqueue ``NAME;retry``,
comes back after ``retry_delay`` seconds for another cycle, and after
``retry_cycles`` cycles moves to ``NAME;poison``, where it stays until an
operator moves it back (``move``) or receives it. Every queue has these two
subqueues; nothing can be sent to them, but they can be peeked and received
from like any queue. Each message says how often it was aborted and moved
(``Message.abort_count``, ``move_count``, ``last_move_time``).

The classes here give the client classes their part, as ``_two_phase_api``
does: :class:`QueueManagerPoison` and :class:`TransactionPoison` for the
blocking client, :class:`AsyncQueueManagerPoison` and
:class:`AsyncTransactionPoison` for the trio one. These are protocol version
4 requests: against an older daemon they raise :class:`NotSupported` before
anything is sent.
"""

from __future__ import annotations

import datetime as _dt
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from wire import client_frames as cf

from . import _common as common
from ._errors import InvalidArgument
from ._replies import unexpected

if TYPE_CHECKING:
    from ._blocking import QueueManager
    from ._protocol import ClientProtocol
    from ._transaction import TransactionState
    from ._trio import AsyncQueueManager

__all__ = [
    "AsyncQueueManagerPoison",
    "AsyncTransactionPoison",
    "MoveResult",
    "QueueManagerPoison",
    "TransactionPoison",
    "create_request",
    "require_poison",
]

#: Seconds: a number or a ``datetime.timedelta``.
Seconds = float | _dt.timedelta


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


def require_poison(version: int, address: str, what: str) -> None:
    """Raise unless the connection's protocol version has poison handling.

    Raises:
        NotSupported: the daemon is older than these requests.
    """
    common.require_version(
        version, cf.POISON_VERSION, address, what, "poison handling and subqueues"
    )


def _seconds(value: Seconds | None) -> float | None:
    if value is None:
        return None
    seconds = value.total_seconds() if isinstance(value, _dt.timedelta) else value
    if isinstance(seconds, bool) or not isinstance(seconds, int | float) or math.isnan(seconds):
        msg = f"retry_delay must be seconds (a number or a timedelta), not {value!r}"
        raise InvalidArgument(msg)
    return float(seconds)


def create_request(
    proto: ClientProtocol[Any],
    *,
    name: str,
    transactional: bool,
    journal: bool,
    quota: int | None,
    retry_count: int | None,
    retry_cycles: int | None,
    retry_delay: Seconds | None,
) -> cf.CreateQueue:
    """The CreateQueue request of ``create_queue()``, checked.

    Raises:
        NotSupported: retry settings for a daemon older than protocol version 5.
        InvalidArgument: ``retry_delay`` is not seconds.
    """
    delay = _seconds(retry_delay)
    if (retry_count, retry_cycles, delay) != (None, None, None):
        require_poison(proto.version, proto.address, "create_queue(retry_...=)")
    return cf.CreateQueue(
        name=name,
        transactional=transactional,
        journal=journal,
        quota=quota,
        retry_count=retry_count,
        retry_cycles=retry_cycles,
        retry_delay=delay,
    )


def _properties_request(
    name: str,
    poison_handling: bool | None,
    retry_count: int | None,
    retry_cycles: int | None,
    retry_delay: Seconds | None,
) -> cf.SetQueueProperties:
    handling = {
        None: cf.PoisonHandling.UNCHANGED,
        True: cf.PoisonHandling.ON,
        False: cf.PoisonHandling.OFF,
    }.get(poison_handling)
    if handling is None:
        msg = f"poison_handling must be None, True or False, not {poison_handling!r}"
        raise InvalidArgument(msg)
    return cf.SetQueueProperties(
        name=name,
        poison=handling,
        retry_count=retry_count,
        retry_cycles=retry_cycles,
        retry_delay=_seconds(retry_delay),
    )


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
    if type(reply) is not cf.Moved:
        raise unexpected(reply, "Moved")
    return MoveResult(reply.count, reply.lookup_id if reply.count and reply.lookup_id else None)


class QueueManagerPoison:
    """``set_queue_properties`` and ``move`` of ``QueueManager``."""

    if TYPE_CHECKING:
        _proto: ClientProtocol[Any]

        def _call(self, value: cf.ClientRequest) -> cf.ServerReply: ...

    def set_queue_properties(
        self,
        name: str,
        *,
        retry_count: int | None = None,
        retry_cycles: int | None = None,
        retry_delay: Seconds | None = None,
        poison_handling: bool | None = None,
    ) -> None:
        """Change a queue's poison handling; the messages already in it are not changed.

        Any value given turns poison handling on; what is not given keeps its
        value, or WCF's default if poison handling was off (retry_count 5,
        retry_cycles 2, retry_delay 1800 s). ``poison_handling=False`` turns it
        off (aborts are still counted; nothing moves) and takes no value.

        Args:
            name: the queue (not a subqueue, journal or system queue).
            retry_count: aborted receives a message may have before it moves
                to ``NAME;retry``: it is received ``retry_count + 1`` times per cycle.
            retry_cycles: trips through ``NAME;retry`` before ``NAME;poison``.
            retry_delay: seconds (or a ``timedelta``) a message waits in ``;retry``.
            poison_handling: True turns it on with what is given, False off.

        Raises:
            QueueNotFound, InvalidName, InvalidArgument; AccessDenied: not an
            application queue; NotSupported: the daemon is too old.
        """
        request = _properties_request(name, poison_handling, retry_count, retry_cycles, retry_delay)
        self._poison_call("set_queue_properties()", request)

    def move(
        self, from_queue: str, to_queue: str, lookup_id: int | None = None, *, all: bool = False
    ) -> MoveResult:
        """Move messages between a queue and one of its subqueues (either way),
        or between two subqueues of one queue, as MSMQ's MQMoveMessage does.

        A moved message keeps its id, body and properties; it gets a new
        lookup id in its new queue, its abort count starts at 0 and its
        move count grows by one. Each message moves atomically: after any
        failure it is in exactly one of the two queues.

        Args:
            from_queue: where the messages are (``orders;poison``).
            to_queue: where they go (``orders``).
            lookup_id: the message to move; without it, the next one a
                receive would get (none there: ``count`` 0).
            all: every message in ``from_queue`` when the move begins
                (moved in steps; messages held by transactions stay).

        Raises:
            QueueNotFound: a queue, or the message named, is not there (or a
            transaction holds it); InvalidArgument: the queues are not one
            family; NotSupported: the daemon is too old.
        """
        request = _move_request(0, from_queue, to_queue, lookup_id, all)
        return _moved(self._poison_call("move()", request))

    def _poison_call(self, what: str, request: cf.ClientRequest) -> cf.ServerReply:
        proto = self._proto
        require_poison(proto.version, proto.address, what)
        return self._call(request)


class AsyncQueueManagerPoison:
    """``set_queue_properties`` and ``move`` of ``AsyncQueueManager``."""

    if TYPE_CHECKING:
        _proto: ClientProtocol[Any]

        async def _request(self, value: cf.ClientRequest) -> cf.ServerReply: ...

    async def set_queue_properties(
        self,
        name: str,
        *,
        retry_count: int | None = None,
        retry_cycles: int | None = None,
        retry_delay: Seconds | None = None,
        poison_handling: bool | None = None,
    ) -> None:
        """Change a queue's poison handling; see ``QueueManager.set_queue_properties``."""
        request = _properties_request(name, poison_handling, retry_count, retry_cycles, retry_delay)
        await self._poison_request("set_queue_properties()", request)

    async def move(
        self, from_queue: str, to_queue: str, lookup_id: int | None = None, *, all: bool = False
    ) -> MoveResult:
        """Move messages between a queue and its subqueues; see ``QueueManager.move``."""
        request = _move_request(0, from_queue, to_queue, lookup_id, all)
        return _moved(await self._poison_request("move()", request))

    async def _poison_request(self, what: str, request: cf.ClientRequest) -> cf.ServerReply:
        proto = self._proto
        require_poison(proto.version, proto.address, what)
        return await self._request(request)


def _tx_move_request(
    proto: ClientProtocol[Any],
    state: TransactionState,
    source: str,
    target: str,
    lookup_id: int | None,
) -> cf.MoveMessages:
    require_poison(proto.version, proto.address, "Transaction.move()")
    state.check()
    return _move_request(state.id, source, target, lookup_id, False)


def _tx_moved(reply: cf.ServerReply, state: TransactionState) -> bool:
    result = _moved(reply)
    state.check()
    return result.count > 0


class TransactionPoison:
    """``Transaction.move``."""

    __slots__ = ()

    if TYPE_CHECKING:
        _qm: QueueManager
        _proto: ClientProtocol[Any]
        _state: TransactionState

    def move(self, from_queue: str, to_queue: str, lookup_id: int | None = None) -> bool:
        """Move one message (the one named, or the next) between a queue and its
        subqueue inside the transaction: it is held now and moves when the
        transaction commits; an abort leaves it where it was (not counted as an
        aborted receive). Both queues must be transactional. Returns False if
        there was no message to move. A transaction that moves cannot be prepared.

        Raises:
            as :meth:`QueueManager.move`; TransactionUsageError: a
            non-transactional queue.
        """
        request = _tx_move_request(self._proto, self._state, from_queue, to_queue, lookup_id)
        return _tx_moved(self._qm._call(request), self._state)


class AsyncTransactionPoison:
    """``AsyncTransaction.move``."""

    __slots__ = ()

    if TYPE_CHECKING:
        _qm: AsyncQueueManager
        _proto: ClientProtocol[Any]
        _state: TransactionState

    async def move(self, from_queue: str, to_queue: str, lookup_id: int | None = None) -> bool:
        """Move one message inside the transaction; see ``Transaction.move``."""
        request = _tx_move_request(self._proto, self._state, from_queue, to_queue, lookup_id)
        return _tx_moved(await self._qm._request(request), self._state)
