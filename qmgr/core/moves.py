"""Moves by request: MSMQ's MQMoveMessage, and dead letters back to their queues.

Theory of operation
-------------------
A message moves with ``storage.MoveMessage``: one write removes it from its
queue and appends it to another, with a new lookup id there; it keeps its
id, body, label, correlation id, priority and every other property, its
abort count starts again at 0, its move count grows by one and its last
move time is the write's. :meth:`Moves.move_queues` says which pairs may:

* a queue and one of its subqueues (``NAME;retry``, ``NAME;poison``), either
  way, or two subqueues of one queue (MSMQ 4.0);
* a dead-letter queue of this queue manager (``system$;deadletter``,
  ``system$;deadxact``) and an application queue (a NORMAL queue: not a
  journal, a subqueue, a system or an outgoing queue), named; or, naming no
  target, each message *back* to the queue it was sent to
  (:meth:`Moves.origin`).

**A dead letter becomes an ordinary message of its queue again.** Its
dead-letter copy (``outcomes.Outcomes.dead_letter``) differs from the message
that died in three things, and the move sets each as the queue's own
messages have it: its class is the NACK that says why it died, and goes
back to MQMSG_CLASS_NORMAL (the store writes the class bytes over the
payload, ``wire.message_class_patch``, without reading the rest); the copy
has no deadline, and the moved message has none either: its time to be
received, which is what made most of them dead, is not applied again (the
property stays in the message as it was sent: an operator who moves a
message back means it to be received); the copy has no note (a FinalAck
owed to its source was reported when it died), nor gets one. Its counters
are those it has in the dead-letter queue, moved as any: abort count 0,
move count + 1.

**Transactional kinds.** MSMQ delivers a transactional message only to a
transactional queue and another only to a non-transactional one (arrivals
refuse a mismatch with NACK_NOT_TRANSACTIONAL_Q or _MSG), and
``system$;deadxact`` holds the transactional ones, ``system$;deadletter``
the others. A message keeps its transactional flag, so a dead letter goes
only to a queue of its kind: a named target of the other kind is refused
(InvalidArgument, naming both queues); moving back, a message whose queue
is of the other kind stays where it is.

**Back to where it was sent.** A message this queue manager sent (its id
has this queue manager's GUID) goes where its destination format name
resolves now, as a send resolves it (``Addressing.destinations``); a
message from another queue manager goes where it was addressed as it
arrived (``addressing.arrival_address``, as ``arrivals`` takes it: the
queue path alone, unless this queue manager is a router). Anything but one
existing local application queue of the message's kind (a queue on
another queue manager, a distribution list or several queues, a queue
deleted since, a journal) leaves the message in the dead-letter queue: a
move of the one message named fails saying why (QueueNotFound for a queue
that does not exist, InvalidArgument otherwise); a move of all passes it
over (counted in :attr:`MoveStep.skipped`).

**Who may.** The request's authorization checks the source and a named
target before anything runs. Moving back, the caller also passes
``denied``, which says why the principal may not move a message into a
queue (or None), and it is asked for each message's queue: a message the
principal may not move there stays (the one named: AccessDenied).

**Holding.** A move takes its message as a receive does (the engine's
``take``): it is held while its move is written, or, in a transaction,
until the commit writes the move or an abort leaves it (not counted as an
aborted receive). A held message (by a transaction, another move, an
expiry) is passed over, so nothing moves twice. A move of all moves what
was there when it began (lookup ids up to ``through``), in bounded steps
(:meth:`Moves.move_step`) that each hold up to a step of messages and
return the non-atomic unit moving them, in which each message's move
succeeds or fails on its own; each step goes on after the last lookup id
the one before looked at, so a message left behind is not looked at again.
A move back reads each message (its destination is in it) one at a time,
and fewer per step. Whatever the caller replies is said once the unit is
written and synced: a message is then in exactly one of the two queues.
Out of a dead-letter queue, the target's quota must have room for the
message (``QuotaExceeded`` otherwise), as for an arrival; within a family
the subqueues share their queue's quota.

Like the rest of the core: no I/O, no clock, no logging.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable
from dataclasses import KW_ONLY, dataclass
from typing import Final, Protocol

import storage
from storage import MoveMessage, QueueKind, QueueRecord, Store, Unit, UnitOutcome, message_payload
from wire import MessageClass, MessageProperties, ProtocolError, message_class_patch, quoted

from .addressing import Addressing, arrival_address
from .errors import (
    AccessDenied,
    InvalidArgument,
    QueueManagerError,
    QueueNotFound,
    TransactionUsageError,
    from_store_error,
)
from .holds import Holds
from .names import RETRY_SUFFIX
from .transactions import Tally, Transaction

__all__ = ["BACK_STEP", "DEAD_LETTER_KINDS", "MOVE_STEP", "Denied", "MoveStep", "Moves"]

#: Messages one step of a move of a whole queue moves.
MOVE_STEP: Final = 2048
#: Messages one step of a move back reads (each is read to find its queue).
BACK_STEP: Final = 256
#: The queues a dead letter moves out of.
DEAD_LETTER_KINDS: Final = (QueueKind.DEADLETTER, QueueKind.DEADXACT)
#: What a move out of a dead-letter queue writes over its message: the normal class.
_NORMAL_CLASS: Final = message_class_patch(MessageClass.NORMAL)
_DIRECT: Final = "DIRECT="

#: Why the principal may not move a message into a queue, or None if it may.
Denied = Callable[[QueueRecord], str | None]


class Take(Protocol):
    """The engine's receive (``QueueManagerCore.take``), with which a move holds
    its message as a receive would."""

    def __call__(
        self, queue: QueueRecord, *, lookup_id: int = 0, tx: Transaction | None, now: float
    ) -> tuple[int, bytes] | None: ...


class Peek(Protocol):
    """The engine's peek (``QueueManagerCore.peek``): the message a receive would
    take (or the one named), not held."""

    def __call__(self, queue: QueueRecord, *, lookup_id: int = 0) -> tuple[int, bytes] | None: ...


@dataclass(frozen=True, slots=True)
class MoveStep:
    """One step of a move of all messages."""

    #: The messages held for the unit's moves, in its order.
    held: list[int]
    #: The unit that moves them (None when none of those looked at may move).
    unit: Unit | None
    #: Messages looked at that stay (moving back: no queue here to go to).
    skipped: int
    #: The last lookup id looked at: the next step starts after it.
    after: int


def _kind(record: QueueRecord) -> str:
    return "transactional" if record.transactional else "non-transactional"


@dataclass(slots=True, eq=False)
class Moves:
    """Moves by request: the queues' records and messages from ``store`` (read
    only), the messages held in ``holds``, moves counted in ``tally``, queue
    references and destinations resolved by ``addressing``, and the engine's
    ``take`` and ``peek``."""

    _store: Store
    _holds: Holds
    _tally: Tally
    _addressing: Addressing
    _: KW_ONLY
    #: The engine's receive.
    take: Take
    #: The engine's peek.
    peek: Peek
    #: This queue manager's GUID: a message with another came from elsewhere.
    guid: uuid.UUID
    #: Whether this queue manager passes messages on (``peers.router``): then an
    #: arriving message's host and port decide whether it is ours.
    router: bool = False
    #: Called once messages were moved into a ``;retry`` subqueue (each is due back
    #: after its queue's retry delay): the poison handling's ``wake``, so that its
    #: worker looks at the due times again.
    retry_queued: Callable[[], None] = lambda: None

    # ------------------------------------------------------------------ the queues

    def move_queues(self, source: str, target: str) -> tuple[QueueRecord, QueueRecord | None]:
        """Resolve the two queues of a move; no target (``""``) out of a dead-letter
        queue: each message back to its queue (the second is then None).

        Raises:
            InvalidName, QueueNotFound; InvalidArgument: they are none of the
                pairs that may (see the module docstring), or a dead-letter
                queue and an application queue of the other transactional kind.
        """
        a = self._addressing.queue(source)
        if not target:
            if a.kind in DEAD_LETTER_KINDS:
                return a, None
            msg = (
                f"a move from {quoted(a.display_name)} must name its target: only a move out of a "
                "dead-letter queue (system$;deadletter, system$;deadxact) may leave it out, "
                "to send each message back to the queue it was sent to"
            )
            raise InvalidArgument(msg)
        b = self._addressing.queue(target)
        if a.kind in DEAD_LETTER_KINDS and b.kind is QueueKind.NORMAL:
            if a.transactional != b.transactional:
                msg = (
                    f"cannot move from {quoted(a.display_name)} to {quoted(b.display_name)}: "
                    f"it holds {_kind(a)} messages, which go only to {_kind(a)} queues, and "
                    f"{quoted(b.display_name)} is {_kind(b)}"
                )
                raise InvalidArgument(msg)
            return a, b
        related = a.queue_id != b.queue_id and (
            (a.kind is QueueKind.NORMAL and b.parent_id == a.queue_id)
            or (b.kind is QueueKind.NORMAL and a.parent_id == b.queue_id)
            or (a.kind is b.kind is QueueKind.SUBQUEUE and a.parent_id == b.parent_id)
        )
        if not related or QueueKind.JOURNAL in (a.kind, b.kind):
            msg = (
                f"cannot move from {quoted(a.display_name)} to {quoted(b.display_name)}: "
                "messages move only between a queue and its own subqueues (NAME;retry, "
                "NAME;poison), or out of a dead-letter queue (system$;deadletter, "
                "system$;deadxact) into an application queue"
            )
            raise InvalidArgument(msg)
        return a, b

    def origin(self, message: MessageProperties) -> QueueRecord:
        """The local application queue ``message`` was sent to (see the module docstring).

        Raises:
            QueueNotFound: that queue does not exist (any more);
            InvalidArgument: its destination is not one queue of this queue
                manager (the message says what it is).
        """
        text = message.destination
        if not text:
            msg = "it names no destination"
            raise InvalidArgument(msg)
        if message.source_qm != self.guid and text[: len(_DIRECT)].upper() == _DIRECT:
            address = arrival_address(
                text[len(_DIRECT) :], self._addressing.identity, router=self.router
            )
            if address is None or not address.is_local:
                msg = f"its destination {quoted(text)} is not a queue of this queue manager"
                raise InvalidArgument(msg)
            record = self._store.get_queue(address.queue)
            if record is None:
                msg = f"its destination {quoted(text)} names no queue here (deleted since?)"
                raise QueueNotFound(msg)
        else:
            record = self._sent_to(text)
        if record.kind is not QueueKind.NORMAL:
            msg = f"its destination {quoted(text)} is not an application queue"
            raise InvalidArgument(msg)
        return record

    def _sent_to(self, text: str) -> QueueRecord:
        """The one local queue a send to ``text`` reaches now."""
        addressing = self._addressing
        try:
            several = addressing.fans_out(text)
            targets = () if several else addressing.destinations(text)
        except QueueNotFound:
            msg = f"its destination {quoted(text)} names no queue here (deleted since?)"
            raise QueueNotFound(msg) from None
        except QueueManagerError as exc:
            msg = f"its destination {quoted(text)} is not an application queue here ({exc.message})"
            raise InvalidArgument(msg) from None
        if several:
            msg = f"its destination {quoted(text)} is a distribution list or several queues"
            raise InvalidArgument(msg)
        [target] = targets
        if not isinstance(target, QueueRecord):
            msg = f"its destination {quoted(text)} is a queue on another queue manager"
            raise InvalidArgument(msg)
        return target

    def _back_to(
        self, source: QueueRecord, lookup_id: int, record: bytes, denied: Denied | None
    ) -> QueueRecord:
        """Where a dead letter goes back to.

        Raises:
            QueueNotFound, InvalidArgument: it has no queue of its kind here;
            AccessDenied: ``denied`` refuses that queue.
        """
        cannot = f"message {lookup_id} of {quoted(source.display_name)} cannot go back: "
        try:
            message = MessageProperties.from_bytes(message_payload(record))
        except ProtocolError as exc:
            msg = f"{cannot}it cannot be read ({exc})"
            raise InvalidArgument(msg) from None
        try:
            target = self.origin(message)
        except QueueManagerError as exc:
            raise type(exc)(cannot + exc.message) from None
        if target.transactional != source.transactional:
            msg = (
                f"{cannot}it is {_kind(source)} and its queue {quoted(target.display_name)} is "
                f"{_kind(target)}"
            )
            raise InvalidArgument(msg)
        why = None if denied is None else denied(target)
        if why is not None:
            raise AccessDenied(why)
        return target

    @staticmethod
    def _operation(source: QueueRecord, lookup_id: int, target: QueueRecord) -> MoveMessage:
        """The write that moves a message (a dead letter gets its normal class back)."""
        patch = _NORMAL_CLASS if source.kind in DEAD_LETTER_KINDS else None
        return MoveMessage(source.queue_id, lookup_id, target.queue_id, patch=patch)

    # ------------------------------------------------------------------ moving

    def move_one(
        self,
        source: QueueRecord,
        target: QueueRecord | None,
        *,
        lookup_id: int,
        tx: Transaction | None,
        now: float,
        denied: Denied | None = None,
    ) -> tuple[int, Unit | None] | None:
        """Hold the message named (or the next free one) for a move to ``target``
        (None: back to its queue, which ``denied`` may refuse).

        Returns:
            None if there is none free; else its lookup id and, outside a
            transaction, the unit that moves it (its outcome goes to
            :meth:`move_done`); in ``tx``, None: the commit moves it.

        Raises:
            TransactionUsageError: in a transaction, from a non-transactional queue.
            TransactionTooLarge: the transaction holds too many operations.
            QueueNotFound, InvalidArgument, AccessDenied: moving back, the
                message cannot go (see :meth:`origin`); it stays, not held.
        """
        if tx is not None and not source.transactional:
            msg = (
                f"queue {quoted(source.display_name)} is not transactional; "
                "move its messages outside the transaction"
            )
            raise TransactionUsageError(msg)
        if target is None:
            # Found, resolved and held in one call: nothing changes in between.
            peeked = self.peek(source, lookup_id=lookup_id)
            if peeked is None:
                return None
            lookup_id = peeked[0]
            target = self._back_to(source, lookup_id, peeked[1], denied)
        found = self.take(source, lookup_id=lookup_id, tx=tx, now=now)
        if found is None:
            return None
        taken = found[0]
        op = self._operation(source, taken, target)
        if tx is not None:
            tx.moves[(source.queue_id, taken)] = op
            tx.receipts.discard((source.queue_id, taken))  # a move is not a receipt
            return taken, None
        return taken, Unit((op,))

    def move_step(
        self,
        source: QueueRecord,
        target: QueueRecord | None,
        *,
        through: int,
        after: int = 0,
        limit: int | None = None,
        denied: Denied | None = None,
    ) -> MoveStep | None:
        """Hold up to ``limit`` free messages with a lookup id above ``after`` and up
        to ``through`` that may move to ``target`` (None: each back to its queue,
        :data:`BACK_STEP` of them at most; else :data:`MOVE_STEP`), with the unit
        that moves them; None when none is left."""
        queue_id = source.queue_id
        holds = self._holds
        if target is not None:
            found = holds.hold_through(
                queue_id, through=through, after=after, limit=limit or MOVE_STEP
            )
            if not found:
                return None
            ops = tuple(self._operation(source, lookup_id, target) for lookup_id in found)
            return MoveStep(found, Unit(ops, atomic=False), 0, found[-1])
        store = self._store
        looked = store.read_through(
            queue_id,
            through=through,
            after=after,
            limit=limit or BACK_STEP,
            skip=holds.held(queue_id),
        )
        if not looked:
            return None
        held: list[int] = []
        moves: list[MoveMessage] = []
        skipped = 0
        for lookup_id in looked:
            record = store.read_message(queue_id, lookup_id)
            if record is None:
                continue
            try:
                back = self._back_to(source, lookup_id, record, denied)
            except QueueManagerError:
                skipped += 1
                continue
            holds.hold(queue_id, lookup_id)
            held.append(lookup_id)
            moves.append(self._operation(source, lookup_id, back))
        unit = Unit(tuple(moves), atomic=False) if moves else None
        return MoveStep(held, unit, skipped, looked[-1])

    def move_done(
        self, source_id: int, held: list[int], outcome: UnitOutcome | BaseException
    ) -> tuple[int, int, set[int], QueueManagerError | None]:
        """Finish a move outside a transaction.

        Returns:
            ``(messages moved, the last one's new lookup id, queues to wake,
            the first failure)``; a message whose move failed stays where it was.
        """
        holds = self._holds
        if isinstance(outcome, BaseException):
            back = holds.release((source_id, lookup_id) for lookup_id in held)
            return 0, 0, back, from_store_error(outcome)
        moved = last = 0
        woken: set[int] = set()
        targets: set[int] = set()
        released: list[tuple[int, int]] = []
        error: QueueManagerError | None = None
        for lookup_id, result in zip(held, outcome.results, strict=True):
            if isinstance(result, storage.Moved):
                moved += 1
                last = result.target_lookup_id
                holds.forget(source_id, lookup_id)
                holds.moved_in(result.target_id)
                targets.add(result.target_id)
            else:
                released.append((source_id, lookup_id))
                if isinstance(result, storage.Failed) and error is None:
                    error = from_store_error(result.error)
        woken |= holds.release(released)
        woken |= targets
        if moved:
            self._tally.commits += 1
            self.moved_into(targets)
        return moved, last, woken, error

    def moved_into(self, target_ids: Iterable[int]) -> None:
        """Messages were moved into these queues (a commit's or :meth:`move_done`'s
        ``storage.Moved`` results): if one is a ``;retry`` subqueue, the poison
        handling must look at the due times again (a message moved there by
        request comes back after the retry delay, as one moved by an abort)."""
        store = self._store
        for target_id in target_ids:
            record = store.get_queue_by_id(target_id)
            if record is not None and record.name.endswith(RETRY_SUFFIX):
                self.retry_queued()
                return
