"""Messages: appending them to a queue and removing them.

Theory of operation
-------------------
:class:`AppendMessage` appends a message record (the store's header and the
layer above's payload, see ``records``) to a queue: the message gets the
queue's next lookup id, and the context writes its priority key (a
non-transactional queue) and its expiry key (a message with a deadline) in
the same write. A queue's quota counts its own bytes, its subqueues' bytes
(``ops.subqueues``) and the bytes prepared transactions reserve on it
(``reservations``): :func:`check_quota`, which prepared transactions use
too. :class:`RemoveMessage` removes one, and with ``journal`` appends a copy
(without the deadline or the note) to the queue's journal queue in the same
unit. Both check first and change nothing when they fail.
:class:`CountedAppend` is an append the store also counts, by a key of the
caller's, in memory since it opened.

:class:`HandedMessage` is an append whose message goes straight to a
receive waiting on the queue (its :class:`Taker`), in the write that sends
it: if the receive still takes it when the batch is planned (told where the
queue's lookup ids stand, it knows whether a message it would find first
was appended since it found the queue empty), the message
gets the queue's next lookup id, its journal copy and its receipt reports
are written as a removal would write them, and the message itself is never
stored. Its result, :class:`Handed`, carries the record the receive
returns. If the receive no longer takes it, or its copy or reports fail, it
is a plain append instead; the quota is checked either way, as for any
append. The sender's sync is then the receive's too: nothing is answered
before it, and a crash before it loses neither, as neither was answered.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, fields
from typing import Protocol

from ..context import PlanContext
from ..errors import QuotaExceeded
from ..overlay import QueueState
from ..records import (
    TIMED_MESSAGE_VERSION,
    encode_message_record,
    message_arrived_time,
    message_header,
    message_payload,
)
from ..units import OPERATION_ERRORS, Operation, Result
from .subqueues import subqueue_bytes

__all__ = [
    "AppendMessage",
    "Appended",
    "CountedAppend",
    "Handed",
    "HandedMessage",
    "RemoveMessage",
    "Removed",
    "Taker",
    "check_quota",
]


@dataclass(frozen=True, slots=True)
class Appended(Result):
    """A message was appended."""

    queue_id: int
    lookup_id: int


@dataclass(frozen=True, slots=True)
class Handed(Appended):
    """A message went straight to a waiting receive (:class:`HandedMessage`): it
    has its lookup id in its queue but was never stored there."""

    #: The message as the store would have kept it (``records``): what the receive returns.
    record: bytes
    #: The queues its receipt reports were appended to.
    reported: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class Removed(Result):
    """A message was removed (and copied to the journal queue, if asked)."""

    queue_id: int
    lookup_id: int


def check_quota(ctx: PlanContext, queue: QueueState, size: int) -> None:
    """Refuse ``size`` more bytes in ``queue`` if they would exceed its quota.

    Bytes reserved by prepared transactions' sends count as used, and so do
    the messages of the queue's subqueues (they share its quota).

    Raises:
        QuotaExceeded: they would.
    """
    record = queue.record
    quota = record.quota
    if quota is None:
        return
    used = queue.bytes + subqueue_bytes(ctx, record)
    would_be = used + ctx.reservations.of(record.queue_id)[0] + size
    if would_be > quota:
        raise QuotaExceeded(record.name, quota, would_be)


@dataclass(frozen=True, slots=True)
class AppendMessage(Operation):
    """Append a message to a queue; it gets the queue's next lookup id.

    ``payload`` is the message as the layer above keeps it (parts are joined
    into the record without copying them first); ``size`` counts against
    the queue's quota.
    """

    queue_id: int
    payload: Sequence[bytes | bytearray | memoryview] | bytes | memoryview
    priority: int
    size: int
    #: When it expires (unix seconds; indexed in ``expiry``), or None.
    deadline: float | None = None
    #: Up to 255 opaque bytes the layer above keeps with the message.
    note: bytes = b""
    #: Not refused by the queue's quota (its bytes still count): for the queue
    #: manager's own messages (acknowledgments, dead-letter and journal copies).
    exempt: bool = False

    def plan(self, ctx: PlanContext) -> Result:
        queue = ctx.live_queue(self.queue_id)
        if not self.exempt:
            check_quota(ctx, queue, self.size)
        return self.append(ctx)

    def append(self, ctx: PlanContext) -> Appended:
        """Append the message without checking the quota (a prepared send's
        bytes were reserved when it was prepared)."""
        record = self.record(ctx.now)
        return Appended(self.queue_id, ctx.append(self.queue_id, record, self.priority, self.size))

    def record(self, now: float) -> bytes:
        """The message's record as the store keeps it, arrived at ``now``."""
        return encode_message_record(
            self.payload,
            priority=self.priority,
            size=self.size,
            arrived_time=now,
            deadline=self.deadline,
            note=self.note,
        )


@dataclass(frozen=True, slots=True)
class CountedAppend(AppendMessage):
    """:class:`AppendMessage` that is also counted, under ``key``, in the store's
    counts since it opened (``Store.counts``), once its batch commits. For the
    layer above's rare messages that monitoring counts by a property the store
    cannot read (dead letters by class); plain appends pay nothing for it.

    A prepared transaction keeps its sends as plain appends: one counted when it
    is prepared is not counted when it commits.
    """

    key: tuple[object, ...] = ()

    def plan(self, ctx: PlanContext) -> Result:
        # Not super(): the zero-argument form fails in a slotted dataclass.
        result = AppendMessage.plan(self, ctx)
        ctx.count(self.key)
        return result


@dataclass(frozen=True, slots=True)
class RemoveMessage(Operation):
    """Remove a message; with ``journal``, copy it into the queue's journal queue."""

    @property
    def frees_space(self) -> bool:
        """Removing data, unless it copies the message to a journal: that needs as
        much room as it frees (LMDB reuses no page freed in the same transaction)."""
        return not self.journal

    queue_id: int
    lookup_id: int
    journal: bool = False

    def plan(self, ctx: PlanContext) -> Result:
        queue = ctx.live_queue(self.queue_id)
        journal_id = queue.record.journal_id if self.journal else None
        if journal_id is not None:
            ctx.live_queue(journal_id)
        data = ctx.message(self.queue_id, self.lookup_id)
        priority, size = message_header(data)
        ctx.remove(self.queue_id, self.lookup_id, priority, size, data)
        if journal_id is not None:
            # The journal keeps the message, not its deadline or note.
            if data[0] == TIMED_MESSAGE_VERSION:
                data = encode_message_record(
                    message_payload(data),
                    priority=priority,
                    size=size,
                    arrived_time=message_arrived_time(data),
                )
            ctx.append(journal_id, bytes(data), priority, size)
        return Removed(self.queue_id, self.lookup_id)


class Taker(Protocol):
    """The receive a :class:`HandedMessage` is for (the layer above's)."""

    def takes(self, next_lookup_id: int) -> bool:
        """Whether it still takes the message: asked once, when the batch is
        planned, with the queue's next lookup id as the batch stands."""
        ...


@dataclass(frozen=True, slots=True)
class HandedMessage(AppendMessage):
    """:class:`AppendMessage`, whose message goes straight to ``taker`` if it still
    takes it (see the module docstring): :class:`Handed`, else :class:`Appended`."""

    #: Copy the handed message to its queue's journal queue, as its removal would.
    journal: bool = False
    #: What the receive writes besides, written only if it takes the message
    #: (its receipt acknowledgments).
    reports: tuple[Operation, ...] = ()
    taker: Taker | None = None

    def plan(self, ctx: PlanContext) -> Result:
        queue = ctx.live_queue(self.queue_id)
        if not self.exempt:
            check_quota(ctx, queue, self.size)
        taker = self.taker
        if taker is not None and taker.takes(queue.next_lookup_id):
            try:
                with ctx.savepoint():
                    return self._hand(ctx)
            except OPERATION_ERRORS:
                pass  # its journal copy or its reports cannot be written: appended
        return self.append(ctx)

    @classmethod
    def of(
        cls,
        append: AppendMessage,
        *,
        journal: bool,
        reports: tuple[Operation, ...],
        taker: Taker,
    ) -> HandedMessage:
        """``append``, for ``taker``."""
        values = {f.name: getattr(append, f.name) for f in fields(AppendMessage)}
        return cls(**values, journal=journal, reports=reports, taker=taker)

    def _hand(self, ctx: PlanContext) -> Handed:
        record = self.record(ctx.now)
        lookup_id = ctx.pass_lookup_id(self.queue_id)
        journal_id = ctx.live_queue(self.queue_id).record.journal_id if self.journal else None
        if journal_id is not None:
            ctx.live_queue(journal_id)
            # The journal keeps the message, not its deadline or note.
            copy = record
            if record[0] == TIMED_MESSAGE_VERSION:
                copy = encode_message_record(
                    self.payload, priority=self.priority, size=self.size, arrived_time=ctx.now
                )
            ctx.append(journal_id, copy, self.priority, self.size)
        results = [op.plan(ctx) for op in self.reports]
        reported = tuple(result.queue_id for result in results if isinstance(result, Appended))
        return Handed(self.queue_id, lookup_id, record, reported)
