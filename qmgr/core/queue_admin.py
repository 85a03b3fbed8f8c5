"""Queues of the core: the system queues, creating, changing the quota, deleting,
purging and erasing.

A queue is created with its journal queue and its two subqueues (``;retry``,
``;poison``), and deleted with them. A purge is of one queue: purging a queue
leaves its subqueues as they are (its poison messages are kept for an
operator to look at), and a subqueue is purged by its own name. An
application queue's quota (its subqueues share it) can be changed, or
removed, at any time: it judges the sends written after the change; a quota
below what the queue holds refuses new sends until enough is received.

Like the rest of the core, :class:`QueueAdmin` returns units and never
writes: deleting and purging only mark, and :meth:`QueueAdmin.erase_unit`
gives the bounded steps that erase afterwards, sparing the messages still
held (``holds``) and reporting the fate of those that asked (``outcomes``).
An outgoing queue's purge (written by the peering adapter) is erased here
too, without reports. A queue that a prepared transaction uses cannot be
deleted until that transaction is resolved (the ``check_deletable`` it is
given, from ``two_phase``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Final

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
    SetQuota,
    Store,
    Unit,
    UnitOutcome,
)
from wire import MessageClass

from . import names
from .addressing import Addressing
from .errors import AccessDenied, InvalidArgument, from_store_error
from .holds import Holds
from .outcomes import DESTINATION_KINDS, Outcomes, record_wants_report
from .permissions import ACL_SETTING_PREFIX
from .poison import check_settings

__all__ = ["MAX_QUOTA", "QueueAdmin"]

#: The largest quota, in bytes: what the store's record holds.
MAX_QUOTA: Final = (1 << 64) - 1

_SYSTEM_QUEUES: Final = (
    (names.DEADLETTER, QueueKind.DEADLETTER),
    (names.DEADXACT, QueueKind.DEADXACT),
    (names.SYSTEM_JOURNAL, QueueKind.SYSTEM_JOURNAL),
)


class QueueAdmin:
    """Creates, deletes, purges and erases queues (the caller writes the units)."""

    __slots__ = ("_addressing", "_check_deletable", "_holds", "_outcomes", "_store")

    def __init__(
        self,
        store: Store,
        addressing: Addressing,
        holds: Holds,
        outcomes: Outcomes,
        *,
        check_deletable: Callable[[Sequence[int], str], None],
    ) -> None:
        """``check_deletable(queue_ids, display_name)`` raises AccessDenied when
        prepared transactions use any of those queues."""
        self._store = store
        self._addressing = addressing
        self._holds = holds
        self._outcomes = outcomes
        self._check_deletable = check_deletable

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
            if self._store.get_queue(key) is None
        ]

    def subqueue_units(self, wall: float) -> list[Unit]:
        """Units creating the subqueues that normal queues made before them lack."""
        store = self._store
        ops = tuple(
            CreateSubqueues(record.name, created_at=wall)
            for record in store.list_queues()
            if record.kind is QueueKind.NORMAL
            and any(store.get_queue(record.name + s) is None for s in names.SUBQUEUE_SUFFIXES)
        )
        return [Unit(ops, atomic=False)] if ops else []

    # ------------------------------------------------------------------ queues

    def all(self) -> list[QueueRecord]:
        """Every queue, by name."""
        return self._store.list_queues()

    def create(
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
        display = names.without_private_prefix(name)
        key = names.validate_new_queue_name(display)
        _check_quota(quota)
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
    def created(outcome: UnitOutcome) -> QueueRecord:
        """The queue a create unit made.

        Raises:
            QueueExists, InvalidArgument, StoreFull: the unit failed.
        """
        result = _only_result(outcome)
        assert isinstance(result, storage.QueueCreated)
        return result.record

    def quota_unit(self, reference: str, quota: int | None) -> tuple[QueueRecord, Unit]:
        """The queue and the unit that gives it a quota of ``quota`` bytes (None: none).

        Raises:
            InvalidName, QueueNotFound, InvalidArgument; AccessDenied: not an
                application queue (a journal, system or subqueue has no quota
                of its own).
        """
        record = self._addressing.application_queue(
            reference, "is not an application queue; it has no quota of its own"
        )
        _check_quota(quota)
        return record, Unit((SetQuota(record.name, quota),))

    @staticmethod
    def properties_set(outcome: UnitOutcome) -> QueueRecord:
        """The queue as a unit that changes its properties (its poison settings,
        its quota, or both) left it.

        Raises:
            QueueNotFound: it was deleted meanwhile.
        """
        error = outcome.error
        if error is not None:
            raise from_store_error(error)
        result = outcome.results[-1]
        assert isinstance(result, storage.PoisonSet | storage.QuotaSet)
        return result.record

    def delete(self, reference: str) -> tuple[QueueRecord, Unit]:
        """The queue and the unit that deletes it (its journal queue and their messages).

        Raises:
            InvalidName, QueueNotFound, AccessDenied
        """
        record = self._addressing.application_queue(
            reference,
            "is a system or journal queue or a subqueue and cannot be deleted "
            "(journal queues and subqueues go with their queue)",
        )
        used = [record.queue_id]
        if record.journal_id is not None:
            used.append(record.journal_id)
        for suffix in names.SUBQUEUE_SUFFIXES:
            sub = self._store.get_queue(record.name + suffix)
            if sub is not None:
                used.append(sub.queue_id)
        self._check_deletable(used, record.display_name)
        # Its permissions go with it (a queue created later under the name gets its own).
        forget_acl = storage.ClearSetting(ACL_SETTING_PREFIX + record.name)
        return record, Unit(
            (DeleteQueue(record.queue_id), DeleteSubqueues(record.name), forget_acl)
        )

    def deleted(self, outcome: UnitOutcome) -> tuple[int, list[int]]:
        """How many messages a delete unit removed, and the queue ids that are gone.

        Transactions holding messages of those queues fail when they commit.

        Raises:
            QueueNotFound: it was already gone.
            AccessDenied: a prepared transaction uses it (one prepared in the
                same batch, which :meth:`delete` could not see yet).
        """
        error = outcome.error
        if isinstance(error, storage.InvalidOperation):
            # The only refusal of a NORMAL queue's delete: prepared transactions pin it.
            msg = f"{error} (qmgr tx list)"
            raise AccessDenied(msg)
        result = _only_result(outcome)
        assert isinstance(result, storage.QueueDeleted)
        gone, messages = list(result.queue_ids), result.messages
        subqueues = outcome.results[1]
        assert isinstance(subqueues, storage.SubqueuesDeleted)
        gone.extend(subqueues.queue_ids)
        messages += subqueues.messages
        for queue_id in gone:
            self._holds.drop_queue(queue_id)
        return messages, gone

    def purge(self, reference: str) -> tuple[QueueRecord, Unit]:
        """The queue and the unit that purges it.

        Messages held by open (or prepared) transactions leave the queue when
        their transaction ends (MSMQ's PurgePending): received if it commits,
        purged if it aborts. The purge does not count them.

        Raises:
            InvalidName, QueueNotFound
        """
        record = self._addressing.queue(reference)
        held = self._holds.held_ids(record.queue_id)
        return record, Unit((PurgeQueue(record.queue_id, held),))

    @staticmethod
    def purged(outcome: UnitOutcome) -> int:
        """How many messages a purge unit made disappear (those transactions
        held, left to them, not counted).

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
        store = self._store
        record = store.get_queue_by_id(queue_id)
        below = None if record is None else record.purged_below
        keep = self._holds.held_ids(queue_id)
        queue = record or store.doomed_queue(queue_id)
        destination = queue is not None and queue.kind in DESTINATION_KINDS
        select = _asks_for_report if destination else _never
        count, last, asked = store.erasable(
            queue_id, limit=limit, keep=keep, below=below, select=select
        )
        if not asked:
            return Unit((EraseStep(queue_id, limit, keep, below),))
        # Exactly the messages read: each one's reports go with its erasure.
        step = EraseStep(queue_id, count, keep, last + 1 if below is None else min(below, last + 1))
        reason = MessageClass.NACK_Q_DELETED if record is None else MessageClass.NACK_Q_PURGED
        reports: list[storage.Operation] = []
        for _, stored in asked:
            reports.extend(self._outcomes.stored_reports(stored, reason, wall=wall))
        return Unit((step, *reports))


def _check_quota(quota: int | None) -> None:
    """Refuse a quota that is not None or a whole number of bytes from 0 to ``MAX_QUOTA``.

    Raises:
        InvalidArgument: it is not.
    """
    if quota is None:
        return
    if isinstance(quota, bool) or not isinstance(quota, int) or not 0 <= quota <= MAX_QUOTA:
        msg = f"quota must be a number of bytes from 0 to {MAX_QUOTA}, not {quota!r}"
        raise InvalidArgument(msg)


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
