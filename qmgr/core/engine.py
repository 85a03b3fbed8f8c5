"""The queue-manager core: queues, transactions and locks, without I/O.

Theory of operation
-------------------
The store (``storage.Store``) holds only committed state: queues and the
messages in them. Everything that is not yet committed lives here, in memory,
on purpose:

* an open :class:`Transaction` keeps its sends (bounded in count and bytes)
  and the messages it has received;
* a received-but-uncommitted message is *locked*: its LookupId is in
  ``_locks[queue_id]`` and every other reader skips it. Nothing about the lock
  is written to disk, so a crash aborts every open transaction simply by
  forgetting: after a restart the locked messages are visible again, in their
  places, and the uncommitted sends never existed.

Committing turns a transaction into one ``storage.CommitUnit`` (removals of
what it received, then its sends in order). The caller hands units to the
store's ``commit_batch`` — several transactions share one write transaction
and one sync (group commit) — and then reports each outcome back with
:meth:`QueueManagerCore.finish_commit`, which releases the locks. A
non-transacted receive (or a single-message transaction) is the same thing
with one removal. Aborting releases the locks, and messages go back to their
original positions because they never left the store: they keep their
LookupIds.

MSMQ's rules about mixing transactions and queues are enforced here (see
:meth:`QueueManagerCore.prepare_send` and :meth:`QueueManagerCore.check_receive`).
Time is always an argument (``now``); this module never reads a clock, never
logs and never blocks except inside the store's own calls.
"""

from __future__ import annotations

import enum
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Final, Protocol

import storage
from storage import (
    CommitOutcome,
    CommitUnit,
    MessageRecord,
    NewMessage,
    QueueKind,
    QueueRecord,
    Removal,
    Store,
)
from wire.client_frames import MAX_LABEL_CHARS, MAX_MESSAGE_BODY

from . import names
from .errors import (
    AccessDenied,
    InternalError,
    InvalidArgument,
    InvalidName,
    MessageTooLarge,
    NotSupported,
    QueueExists,
    QueueManagerError,
    QueueNotFound,
    QuotaExceeded,
    StoreFull,
    TransactionAborted,
    TransactionTooLarge,
    TransactionUsageError,
)

INFINITE: Final = 0xFFFFFFFF
#: Parsed destinations remembered; the cache starts over when it is full.
FORMAT_NAME_CACHE_SIZE: Final = 4096
CORRELATION_ID_SIZE: Final = 20


class SendMode(enum.IntEnum):
    """How a send outside an explicit transaction is carried out (MQ_*_TRANSACTION)."""

    AUTO = 0  #: single-message transaction for a transactional queue, none otherwise
    NONE = 1  #: explicitly non-transactional (an error on a transactional queue)
    SINGLE = 2  #: a single-message transaction (an error on a non-transactional queue)


class SendProperties(Protocol):
    """What a sender sets on a message: :class:`MessageProperties`, or a
    client-protocol ``Send`` frame, which carries the same fields."""

    @property
    def body(self) -> bytes: ...
    @property
    def label(self) -> str: ...
    @property
    def correlation_id(self) -> bytes: ...
    @property
    def app_specific(self) -> int: ...
    @property
    def priority(self) -> int: ...
    @property
    def delivery(self) -> int: ...
    @property
    def acknowledge(self) -> int: ...
    @property
    def journal(self) -> int: ...
    @property
    def admin_queue(self) -> str: ...
    @property
    def response_queue(self) -> str: ...
    @property
    def time_to_reach_queue(self) -> int: ...
    @property
    def time_to_be_received(self) -> int: ...


@dataclass(frozen=True, slots=True, kw_only=True)
class MessageProperties:
    """What a sender sets on a message."""

    body: bytes = b""
    label: str = ""
    correlation_id: bytes = b""
    app_specific: int = 0
    priority: int = 3
    delivery: int = 1
    acknowledge: int = 0
    journal: int = 0
    admin_queue: str = ""
    response_queue: str = ""
    time_to_reach_queue: int = INFINITE
    time_to_be_received: int = INFINITE


@dataclass(frozen=True, slots=True, kw_only=True)
class Limits:
    """Bounds that keep one client from exhausting the daemon's memory."""

    max_transaction_operations: int = 100_000
    max_transaction_bytes: int = 256 * 1024 * 1024


class TransactionState(enum.Enum):
    """Life of a transaction: OPEN → COMMITTING → ENDED, or OPEN → ENDED on abort."""

    OPEN = "open"
    COMMITTING = "committing"
    ENDED = "ended"


@dataclass(slots=True, eq=False)
class Transaction:
    """An internal transaction: its sends and its locked receives, in memory."""

    tx_id: int
    owner: object
    started_at: float
    last_activity: float
    sends: list[NewMessage] = field(default_factory=list)
    send_bytes: int = 0
    receives: list[tuple[int, int]] = field(default_factory=list)
    state: TransactionState = TransactionState.OPEN
    #: Set when something outside the client ended it (timeout, queue deleted).
    abort_reason: str | None = None
    #: The id the owning connection knows it by.
    client_id: int = 0

    @property
    def operations(self) -> int:
        """Sends plus receives so far."""
        return len(self.sends) + len(self.receives)


@dataclass(frozen=True, slots=True)
class PreparedSend:
    """A validated send: one new message per destination queue."""

    messages: tuple[NewMessage, ...]
    queues: tuple[QueueRecord, ...]
    #: True if the caller must commit it as a transaction (sync before reply).
    transactional: bool


class QueueManagerCore:
    """Queue semantics over one store. Not thread-safe; one caller at a time."""

    def __init__(
        self,
        store: Store,
        *,
        identity: names.LocalIdentity | None = None,
        limits: Limits | None = None,
    ) -> None:
        self.store = store
        self.identity = identity or names.LocalIdentity()
        self.limits = limits or Limits()
        self._locks: dict[int, set[int]] = {}
        self._purge_pending: set[tuple[int, int]] = set()
        self._transactions: dict[int, Transaction] = {}
        self._next_tx_id = 1
        self._format_names: dict[str, names.FormatName] = {}

    # ------------------------------------------------------------------
    # Start-up
    # ------------------------------------------------------------------

    def ensure_system_queues(self, now: float) -> list[str]:
        """Create the dead-letter queues if missing; return the names created."""
        created = []
        for key, kind in (
            (names.DEADLETTER, QueueKind.DEADLETTER),
            (names.DEADXACT, QueueKind.DEADXACT),
        ):
            if self.store.get_queue(key) is None:
                self.store.create_queue(
                    name=key,
                    display_name=key,
                    kind=kind,
                    transactional=kind is QueueKind.DEADXACT,
                    now=now,
                )
                created.append(key)
        return created

    # ------------------------------------------------------------------
    # Queues
    # ------------------------------------------------------------------

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

    def create_queue(
        self,
        name: str,
        *,
        transactional: bool = False,
        journal: bool = False,
        quota: int | None = None,
        now: float,
    ) -> QueueRecord:
        """Create a private queue and its journal queue.

        Raises:
            InvalidName, InvalidArgument, QueueExists, StoreFull
        """
        display = _strip_private_prefix(name)
        key = names.validate_queue_name(display)
        if quota is not None and quota < 0:
            msg = f"quota must be a positive number of bytes, not {quota}"
            raise InvalidArgument(msg)
        try:
            return self.store.create_queue(
                name=key,
                display_name=display,
                transactional=transactional,
                journal=journal,
                quota=quota,
                now=now,
            )
        except storage.QueueExists:
            msg = f"queue {display!r} already exists"
            raise QueueExists(msg) from None
        except storage.StoreError as exc:
            raise _translate_store_error(exc) from exc

    def delete_queue(self, reference: str) -> int:
        """Delete a queue, its journal and their messages; return how many messages went.

        Open transactions that received from it fail when they commit.

        Raises:
            InvalidName, QueueNotFound, AccessDenied
        """
        record = self.queue(reference)
        if record.kind is not QueueKind.NORMAL:
            msg = f"{record.display_name!r} is a system or journal queue and cannot be deleted"
            raise AccessDenied(msg)
        try:
            count = self.store.delete_queue(record.name)
        except storage.StoreError as exc:
            raise _translate_store_error(exc) from exc
        for queue_id in (record.queue_id, record.journal_id):
            if queue_id is not None:
                self._locks.pop(queue_id, None)
        self._purge_pending = {item for item in self._purge_pending if item[0] != record.queue_id}
        return count

    def purge_queue(self, reference: str) -> int:
        """Delete every message in a queue; return how many.

        Messages locked by open transactions are marked: they leave the queue
        when their transaction ends, whether it commits or aborts (MSMQ's
        PurgePending).
        """
        record = self.queue(reference)
        locked = self._locks.get(record.queue_id, set())
        try:
            count = self.store.purge_queue(record.queue_id, keep=locked)
        except storage.StoreError as exc:
            raise _translate_store_error(exc) from exc
        self._purge_pending.update((record.queue_id, lookup_id) for lookup_id in locked)
        return count

    def list_queues(self) -> list[QueueRecord]:
        """Every queue, by name."""
        return self.store.list_queues()

    def locked_count(self, queue_id: int) -> int:
        """Messages of the queue held by open transactions."""
        return len(self._locks.get(queue_id, ()))

    # ------------------------------------------------------------------
    # Transactions
    # ------------------------------------------------------------------

    @property
    def open_transactions(self) -> int:
        """Transactions not yet ended."""
        return len(self._transactions)

    def begin(self, owner: object, now: float) -> Transaction:
        """Open an internal transaction owned by ``owner`` (a client connection)."""
        tx = Transaction(tx_id=self._next_tx_id, owner=owner, started_at=now, last_activity=now)
        self._next_tx_id += 1
        self._transactions[tx.tx_id] = tx
        return tx

    def idle_transactions(self, now: float, timeout: float) -> list[Transaction]:
        """Open transactions with no activity for ``timeout`` seconds."""
        return [
            tx
            for tx in self._transactions.values()
            if tx.state is TransactionState.OPEN and now - tx.last_activity > timeout
        ]

    def abort(self, tx: Transaction) -> set[int]:
        """Abort: drop the sends, return received messages to their places.

        Returns:
            The queue ids whose messages became visible again (wake their readers).
        """
        if tx.state is TransactionState.ENDED:
            return set()
        tx.state = TransactionState.ENDED
        self._transactions.pop(tx.tx_id, None)
        tx.sends.clear()
        woken = self._release(tx.receives)
        tx.receives.clear()
        return woken

    def prepare_commit(self, tx: Transaction) -> CommitUnit:
        """Turn an open transaction into a unit for ``Store.commit_batch``.

        Raises:
            TransactionAborted: it was ended by the daemon meanwhile.
        """
        if tx.abort_reason is not None:
            msg = f"transaction {tx.tx_id} was aborted: {tx.abort_reason}"
            raise TransactionAborted(msg)
        tx.state = TransactionState.COMMITTING
        return CommitUnit(sends=tuple(tx.sends), removals=self._removals(tx.receives))

    def finish_commit(
        self, tx: Transaction, outcome: CommitOutcome
    ) -> tuple[set[int], QueueManagerError | None]:
        """Record the store's verdict on a committed transaction.

        Returns:
            The queue ids to wake (queues that received messages or, if the
            unit failed, queues whose locked messages are visible again), and
            the error that aborted the transaction, if it failed.
        """
        tx.state = TransactionState.ENDED
        self._transactions.pop(tx.tx_id, None)
        if outcome.error is not None:
            woken = self._release(tx.receives)
            error = _translate_store_error(outcome.error)
            msg = f"transaction {tx.tx_id} was aborted: {error.message}"
            return woken, TransactionAborted(msg)
        self._forget(tx.receives)
        return {send.queue_id for send in outcome.sends}, None

    def expire(self, tx: Transaction, reason: str) -> set[int]:
        """End a transaction on the daemon's initiative (idle timeout, client gone)."""
        tx.abort_reason = reason
        return self.abort(tx)

    # ------------------------------------------------------------------
    # Sending
    # ------------------------------------------------------------------

    def prepare_send(
        self,
        destination: str,
        properties: SendProperties,
        *,
        tx: Transaction | None,
        mode: SendMode = SendMode.AUTO,
        now: float,
    ) -> PreparedSend:
        """Validate a send and build the messages it creates.

        With ``tx`` the messages are added to the transaction (visible at its
        commit). Without one, the caller commits the returned messages at once:
        as a single-message transaction on transactional queues, or as a plain
        store write on the others.

        Raises:
            InvalidName, QueueNotFound, AccessDenied, NotSupported,
            TransactionUsageError, MessageTooLarge, InvalidArgument,
            TransactionTooLarge
        """
        _check_properties(properties)
        for reference in (properties.admin_queue, properties.response_queue):
            if reference:
                self._parse(reference)
        format_name = self._parse(destination)
        queues: list[QueueRecord] = []
        for element in format_name.elements:
            if not element.is_local:
                msg = (
                    f"{element.text!r} is a queue on another host; "
                    "this queue manager delivers only to its local queues"
                )
                raise NotSupported(msg)
            if element.is_system or element.is_journal:
                msg = f"{element.text!r}: applications cannot send to journal or dead-letter queues"
                raise AccessDenied(msg)
            record = self.store.get_queue(element.queue)
            if record is None:
                msg = f"queue {element.text!r} does not exist"
                raise QueueNotFound(msg)
            queues.append(record)

        transactional = self._send_is_transactional(queues, tx, mode)
        if tx is not None:
            size = len(properties.body) * len(queues)
            if (
                tx.operations + len(queues) > self.limits.max_transaction_operations
                or tx.send_bytes + size > self.limits.max_transaction_bytes
            ):
                msg = (
                    f"transaction {tx.tx_id} would hold more than "
                    f"{self.limits.max_transaction_operations} operations or "
                    f"{self.limits.max_transaction_bytes} bytes; commit it and start another"
                )
                raise TransactionTooLarge(msg)
        messages = tuple(
            NewMessage(
                queue_id=queue.queue_id,
                record=_message_record(
                    properties,
                    queue=queue,
                    destination=destination if not format_name.is_multiple else element.text,
                    transactional=transactional,
                    source_qm=self.store.qm_guid,
                    now=now,
                ),
            )
            for queue, element in zip(queues, format_name.elements, strict=True)
        )
        if tx is not None:
            tx.sends.extend(messages)
            tx.send_bytes += len(properties.body) * len(messages)
            tx.last_activity = now
        return PreparedSend(messages=messages, queues=tuple(queues), transactional=transactional)

    def _parse(self, text: str) -> names.FormatName:
        """Parse a format name, remembering the answer (senders repeat themselves)."""
        parsed = self._format_names.get(text)
        if parsed is None:
            parsed = names.parse_format_name(text, self.identity)
            if len(self._format_names) >= FORMAT_NAME_CACHE_SIZE:
                self._format_names.clear()
            self._format_names[text] = parsed
        return parsed

    def _send_is_transactional(
        self, queues: Sequence[QueueRecord], tx: Transaction | None, mode: SendMode
    ) -> bool:
        for queue in queues:
            if tx is not None and not queue.transactional:
                msg = (
                    f"queue {queue.display_name!r} is not transactional; "
                    "send to it outside the transaction"
                )
                raise TransactionUsageError(msg)
            if tx is None and mode is SendMode.NONE and queue.transactional:
                msg = (
                    f"queue {queue.display_name!r} is transactional; "
                    "send inside a transaction or as a single-message transaction"
                )
                raise TransactionUsageError(msg)
            if tx is None and mode is SendMode.SINGLE and not queue.transactional:
                msg = (
                    f"queue {queue.display_name!r} is not transactional; send without a transaction"
                )
                raise TransactionUsageError(msg)
        if tx is not None:
            return True
        kinds = {queue.transactional for queue in queues}
        if len(kinds) > 1:
            msg = (
                "a multiple-element send outside a transaction cannot mix "
                "transactional queues with others"
            )
            raise TransactionUsageError(msg)
        return kinds == {True}

    # ------------------------------------------------------------------
    # Receiving
    # ------------------------------------------------------------------

    def check_receive(self, queue: QueueRecord, tx: Transaction | None, *, peek: bool) -> None:
        """Apply MSMQ's rules for who may receive from a queue.

        Raises:
            TransactionUsageError: receiving inside a transaction from a
                non-transactional queue.
        """
        if peek:
            return
        if tx is not None and not queue.transactional:
            msg = (
                f"queue {queue.display_name!r} is not transactional; "
                "receive from it outside the transaction"
            )
            raise TransactionUsageError(msg)

    def find(self, queue: QueueRecord, *, lookup_id: int = 0) -> tuple[int, MessageRecord] | None:
        """The message a receive or peek would return now, skipping locked ones."""
        locked = self._locks.get(queue.queue_id, ())
        if lookup_id:
            if lookup_id in locked:
                return None
            record = self.store.read_message(queue.queue_id, lookup_id)
            return None if record is None else (lookup_id, record)
        return self.store.first_available(
            queue.queue_id, skip=locked, by_priority=not queue.transactional
        )

    def peek_range(
        self, queue: QueueRecord, *, after: int, limit: int
    ) -> list[tuple[int, MessageRecord]]:
        """Visible messages with a LookupId above ``after``, in LookupId order."""
        return self.store.read_range(
            queue.queue_id, after=after, limit=limit, skip=self._locks.get(queue.queue_id, ())
        )

    def lock(self, queue: QueueRecord, lookup_id: int, tx: Transaction | None, now: float) -> None:
        """Hide a message from every other reader (received in ``tx``, or being removed)."""
        self._locks.setdefault(queue.queue_id, set()).add(lookup_id)
        if tx is not None:
            if tx.operations + 1 > self.limits.max_transaction_operations:
                self._locks[queue.queue_id].discard(lookup_id)
                msg = (
                    f"transaction {tx.tx_id} holds too many operations; commit it and start another"
                )
                raise TransactionTooLarge(msg)
            tx.receives.append((queue.queue_id, lookup_id))
            tx.last_activity = now

    def removal_unit(self, queue: QueueRecord, lookup_id: int) -> CommitUnit:
        """A unit that removes one locked message (a non-transacted receive)."""
        return CommitUnit(removals=self._removals([(queue.queue_id, lookup_id)]))

    def finish_removal(
        self, queue_id: int, lookup_id: int, outcome: CommitOutcome | None
    ) -> tuple[set[int], QueueManagerError | None]:
        """Release the lock of a non-transacted receive after its unit ran.

        ``outcome`` None means the batch failed as a whole (the error is the
        caller's); the message is then visible again.

        Returns:
            Queue ids to wake, and the error if the removal failed.
        """
        if outcome is None or outcome.error is not None:
            woken = self._release([(queue_id, lookup_id)])
            error = None if outcome is None or outcome.error is None else outcome.error
            return woken, None if error is None else _translate_store_error(error)
        self._forget([(queue_id, lookup_id)])
        return set(), None

    # ------------------------------------------------------------------
    # Locks
    # ------------------------------------------------------------------

    def _removals(self, receives: Iterable[tuple[int, int]]) -> tuple[Removal, ...]:
        removals = []
        for queue_id, lookup_id in receives:
            record = self.store.get_queue_by_id(queue_id)
            journal = bool(
                record is not None and record.journal and record.kind is QueueKind.NORMAL
            )
            removals.append(Removal(queue_id=queue_id, lookup_id=lookup_id, journal=journal))
        return tuple(removals)

    def _release(self, receives: Iterable[tuple[int, int]]) -> set[int]:
        """Unlock messages that stay in their queue; purge-pending ones leave now."""
        woken: set[int] = set()
        purged: list[tuple[int, int]] = []
        for queue_id, lookup_id in receives:
            locked = self._locks.get(queue_id)
            if locked is not None:
                locked.discard(lookup_id)
                if not locked:
                    del self._locks[queue_id]
            if (queue_id, lookup_id) in self._purge_pending:
                self._purge_pending.discard((queue_id, lookup_id))
                purged.append((queue_id, lookup_id))
            else:
                woken.add(queue_id)
        if purged:
            # A purge happened while these were locked: they leave the queue now.
            # A per-unit error only means they are already gone (queue deleted).
            # If the write fails as a whole (disk full), they stay visible, as
            # after a restart: an abort must never fail half-way.
            unit = CommitUnit(
                removals=tuple(Removal(queue_id=q, lookup_id=m, journal=False) for q, m in purged)
            )
            try:
                self.store.commit_batch([unit], now=0.0)
            except storage.StoreError:
                woken.update(queue_id for queue_id, _ in purged)
        return woken

    def _forget(self, receives: Iterable[tuple[int, int]]) -> None:
        for queue_id, lookup_id in receives:
            locked = self._locks.get(queue_id)
            if locked is not None:
                locked.discard(lookup_id)
                if not locked:
                    del self._locks[queue_id]
            self._purge_pending.discard((queue_id, lookup_id))


def _strip_private_prefix(name: str) -> str:
    lowered = name.lower()
    for prefix in (".\\private$\\", "private$\\"):
        if lowered.startswith(prefix):
            return name[len(prefix) :]
    return name


def _check_properties(properties: SendProperties) -> None:
    if len(properties.body) > MAX_MESSAGE_BODY:
        msg = (
            f"message body is {len(properties.body)} bytes; the limit is {MAX_MESSAGE_BODY} (4 MB)"
        )
        raise MessageTooLarge(msg)
    if len(properties.label) > MAX_LABEL_CHARS:
        msg = f"label is {len(properties.label)} characters; the limit is {MAX_LABEL_CHARS}"
        raise InvalidArgument(msg)
    if len(properties.correlation_id) not in (0, CORRELATION_ID_SIZE):
        size = len(properties.correlation_id)
        msg = f"correlation id must be {CORRELATION_ID_SIZE} bytes, not {size}"
        raise InvalidArgument(msg)
    if not 0 <= properties.priority <= 7:
        msg = f"priority must be 0..7, not {properties.priority}"
        raise InvalidArgument(msg)
    if properties.delivery not in (0, 1):
        msg = f"delivery must be 0 (express) or 1 (recoverable), not {properties.delivery}"
        raise InvalidArgument(msg)
    if not 0 <= properties.acknowledge <= 0x0F:
        msg = f"acknowledge must be MQMSG_ACKNOWLEDGMENT bits (0..15), not {properties.acknowledge}"
        raise InvalidArgument(msg)
    if properties.acknowledge and not properties.admin_queue:
        msg = "an acknowledgment level needs an admin queue to send acknowledgments to"
        raise InvalidArgument(msg)
    if not 0 <= properties.journal <= 3:
        msg = f"journal level must be 0..3, not {properties.journal}"
        raise InvalidArgument(msg)
    if not 0 <= properties.app_specific <= 0xFFFFFFFF:
        msg = f"app_specific must fit in 32 bits, not {properties.app_specific}"
        raise InvalidArgument(msg)
    for name, value in (
        ("time_to_reach_queue", properties.time_to_reach_queue),
        ("time_to_be_received", properties.time_to_be_received),
    ):
        if not 0 <= value <= INFINITE:
            msg = f"{name} must be 0..{INFINITE} seconds, not {value}"
            raise InvalidArgument(msg)


def _message_record(
    properties: SendProperties,
    *,
    queue: QueueRecord,
    destination: str,
    transactional: bool,
    source_qm: uuid.UUID,
    now: float,
) -> MessageRecord:
    return MessageRecord(
        message_id_qm=source_qm,
        message_id_ordinal=0,
        label=properties.label,
        body=properties.body,
        correlation_id=properties.correlation_id,
        app_specific=properties.app_specific,
        # Transactional messages ignore priority (MSMQ sends them with PR=0).
        priority=0 if transactional else properties.priority,
        delivery=1 if transactional else properties.delivery,
        acknowledge=properties.acknowledge,
        journal_level=properties.journal,
        admin_queue=properties.admin_queue,
        response_queue=properties.response_queue,
        time_to_reach_queue=properties.time_to_reach_queue,
        time_to_be_received=properties.time_to_be_received,
        message_class=0,
        sent_time=now,
        arrived_time=now,
        source_qm=source_qm,
        transactional=transactional,
        destination=destination,
    )


def _translate_store_error(error: BaseException) -> QueueManagerError:
    """Map a store error to the client-facing error with the same meaning."""
    if isinstance(error, QueueManagerError):
        return error
    if isinstance(error, storage.QuotaExceeded):
        return QuotaExceeded(str(error))
    if isinstance(error, storage.QueueMissing):
        return QueueNotFound(f"queue no longer exists: {error}")
    if isinstance(error, storage.MessageMissing):
        return QueueNotFound(f"message no longer exists: {error}")
    if isinstance(error, storage.StoreFull):
        return StoreFull(f"the store is full: {error}")
    if isinstance(error, storage.QueueExists):
        return QueueExists(str(error))
    return InternalError(f"store error: {error}")


translate_store_error = _translate_store_error

__all__ = [
    "InvalidName",
    "Limits",
    "MessageProperties",
    "PreparedSend",
    "QueueManagerCore",
    "SendMode",
    "Transaction",
    "TransactionState",
    "translate_store_error",
]
