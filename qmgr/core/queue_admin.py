"""Queues of the core: the system queues, creating, deleting, purging and erasing.

A queue is created with its journal queue and its two subqueues (``;retry``,
``;poison``), and deleted with them. A purge is of one queue: purging a queue
leaves its subqueues as they are (its poison messages are kept for an
operator to look at), and a subqueue is purged by its own name.

Part of :class:`~qmgr.core.engine.QueueManagerCore` (a base class of it), kept
apart so that each module stays one subject. Like the rest of the core it
returns units and never writes: deleting and purging only mark, and
:meth:`QueueAdmin.erase_unit` gives the bounded steps that erase afterwards.
A queue that a prepared transaction uses cannot be deleted until that
transaction is resolved.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

import storage
from storage import (
    CreateQueue,
    CreateSubqueues,
    DeleteQueue,
    DeleteSubqueues,
    EraseStep,
    PoisonSettings,
    PurgeQueue,
    QueueKind,
    QueueRecord,
    SetPoisonSettings,
    Store,
    Unit,
    UnitOutcome,
)
from wire import MessageClass, MessageProperties

from . import names
from .errors import AccessDenied, InvalidArgument, QueueNotFound, from_store_error
from .locks import LockTable
from .outcomes import DESTINATION_KINDS, Outcomes, record_wants_report
from .poison import check_settings

if TYPE_CHECKING:
    from .two_phase import TwoPhase

__all__ = ["QueueAdmin"]

_SYSTEM_QUEUES: Final = (
    (names.DEADLETTER, QueueKind.DEADLETTER),
    (names.DEADXACT, QueueKind.DEADXACT),
    (names.SYSTEM_JOURNAL, QueueKind.SYSTEM_JOURNAL),
)


class QueueAdmin:
    """The queue methods of the core."""

    store: Store
    identity: names.LocalIdentity
    locks: LockTable
    two_phase: TwoPhase
    outcomes: Outcomes

    # ------------------------------------------------------------------ start-up

    def system_queue_units(self, wall: float) -> list[Unit]:
        """Units creating the dead-letter queues that do not exist yet."""
        return [
            Unit(
                (
                    CreateQueue(
                        key,
                        key,
                        kind=kind,
                        transactional=kind is QueueKind.DEADXACT,
                        created_at=wall,
                    ),
                )
            )
            for key, kind in _SYSTEM_QUEUES
            if self.store.get_queue(key) is None
        ]

    # ------------------------------------------------------------------ queues

    def queue(self, reference: str) -> QueueRecord:
        """Resolve a local queue reference (name or format name) to its record.

        Raises:
            InvalidName, QueueNotFound
        """
        address = names.parse_queue_reference(reference, self.identity)
        record = self.store.get_queue(address.queue)
        if record is None:
            msg = f"queue {reference!r} does not exist"
            raise QueueNotFound(msg)
        return record

    def list_queues(self) -> list[QueueRecord]:
        """Every queue, by name."""
        return self.store.list_queues()

    def held_count(self, queue_id: int) -> int:
        """Messages of the queue held by open transactions (or being removed)."""
        return self.locks.count(queue_id)

    def create_queue(
        self,
        name: str,
        *,
        transactional: bool = False,
        journal: bool = False,
        quota: int | None = None,
        poison: PoisonSettings | None = None,
        wall: float,
    ) -> Unit:
        """The unit that creates a private queue, its journal queue and its
        subqueues (``;retry``, ``;poison``), with poison handling if ``poison``
        is given (see ``poison.merge_settings``).

        Raises:
            InvalidName, InvalidArgument
        """
        display = _strip_private_prefix(name)
        key = names.validate_queue_name(display)
        if quota is not None and quota < 0:
            msg = f"quota must be a positive number of bytes, not {quota}"
            raise InvalidArgument(msg)
        op = CreateQueue(
            key,
            display,
            transactional=transactional,
            journal=journal,
            quota=quota,
            created_at=wall,
        )
        subqueues = CreateSubqueues(key, created_at=wall)
        if poison is None:
            return Unit((op, subqueues))
        return Unit((op, subqueues, SetPoisonSettings(key, check_settings(poison))))

    @staticmethod
    def queue_created(outcome: UnitOutcome) -> QueueRecord:
        """The queue a create unit made.

        Raises:
            QueueExists, InvalidArgument, StoreFull: the unit failed.
        """
        result = _only_result(outcome)
        assert isinstance(result, storage.QueueCreated)
        return result.record

    def delete_queue(self, reference: str) -> tuple[QueueRecord, Unit]:
        """The queue and the unit that deletes it (its journal queue and their messages).

        Raises:
            InvalidName, QueueNotFound, AccessDenied
        """
        record = self.queue(reference)
        if record.kind is not QueueKind.NORMAL:
            msg = (
                f"{record.display_name!r} is a system or journal queue or a subqueue and "
                "cannot be deleted (journal queues and subqueues go with their queue)"
            )
            raise AccessDenied(msg)
        used = [record.queue_id]
        if record.journal_id is not None:
            used.append(record.journal_id)
        for suffix in names.SUBQUEUE_SUFFIXES:
            sub = self.store.get_queue(record.name + suffix)
            if sub is not None:
                used.append(sub.queue_id)
        self.two_phase.check_deletable(used, record.display_name)
        return record, Unit((DeleteQueue(record.queue_id), DeleteSubqueues(record.name)))

    def queue_deleted(self, outcome: UnitOutcome) -> tuple[int, list[int]]:
        """How many messages a delete unit removed, and the queue ids that are gone.

        Transactions holding messages of those queues fail when they commit.

        Raises:
            QueueNotFound: it was already gone.
            AccessDenied: a prepared transaction uses it (one prepared in the
                same batch, which :meth:`delete_queue` could not see yet).
        """
        error = outcome.error
        if isinstance(error, storage.InvalidOperation):
            # The only refusal of a NORMAL queue's delete: prepared transactions pin it.
            msg = f"{error} (qmgr tx list)"
            raise AccessDenied(msg)
        result = _only_result(outcome)
        assert isinstance(result, storage.QueueDeleted)
        gone, messages = list(result.queue_ids), result.messages
        for more in outcome.results[1:]:  # its subqueues
            assert isinstance(more, storage.SubqueuesDeleted)
            gone.extend(more.queue_ids)
            messages += more.messages
        for queue_id in gone:
            self.locks.drop_queue(queue_id)
        return messages, gone

    def purge_queue(self, reference: str) -> tuple[QueueRecord, Unit]:
        """The queue and the unit that purges it.

        Messages held by open transactions leave the queue when their
        transaction ends, whether it commits or aborts (MSMQ's PurgePending).

        Raises:
            InvalidName, QueueNotFound
        """
        record = self.queue(reference)
        return record, Unit((PurgeQueue(record.queue_id),))

    @staticmethod
    def queue_purged(outcome: UnitOutcome) -> int:
        """How many messages a purge unit made disappear.

        Raises:
            QueueNotFound: the queue was gone.
        """
        result = _only_result(outcome)
        assert isinstance(result, storage.QueuePurged)
        return result.messages

    def erase_unit(self, queue_id: int, limit: int, *, wall: float = 0.0) -> Unit:
        """One bounded step of erasing a deleted queue's or a purge's messages, with
        the NACK_Q_DELETED or NACK_Q_PURGED reports of those that asked for them
        (stamped ``wall``)."""
        # The held messages are those below the purge mark as committed now;
        # a purge committed before this step is planned waits for the next one.
        record = self.store.get_queue_by_id(queue_id)
        below = None if record is None else record.purged_below
        keep = self.locks.held_ids(queue_id)
        queue = record or self.store.doomed_queue(queue_id)
        destination = queue is not None and queue.kind in DESTINATION_KINDS
        select = _asks_for_report if destination else _never
        count, last, asked = self.store.erasable(
            queue_id, limit=limit, keep=keep, below=below, select=select
        )
        if not asked:
            return Unit((EraseStep(queue_id, limit, keep, below),))
        # Exactly the messages read: each one's reports go with its erasure.
        step = EraseStep(queue_id, count, keep, last + 1 if below is None else min(below, last + 1))
        reason = MessageClass.NACK_Q_DELETED if record is None else MessageClass.NACK_Q_PURGED
        reports: list[storage.Operation] = []
        for _, stored in asked:
            message = MessageProperties.from_bytes(storage.message_payload(stored))
            note = storage.message_note(stored)
            reports.extend(self.outcomes.effects(message, reason, wall=wall, note=note))
        return Unit((step, *reports))


def _never(record: memoryview) -> bool:
    return False


def _asks_for_report(record: memoryview) -> bool:
    """True for a stored message of an application queue that asks for a report."""
    return record_wants_report(record)


def _only_result(outcome: UnitOutcome) -> storage.Result:
    error = outcome.error
    if error is not None:
        raise from_store_error(error)
    return outcome.results[0]


def _strip_private_prefix(name: str) -> str:
    lowered = name.lower()
    for prefix in (".\\private$\\", "private$\\"):
        if lowered.startswith(prefix):
            return name[len(prefix) :]
    return name
