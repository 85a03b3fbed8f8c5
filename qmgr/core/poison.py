"""Poison handling (MSMQ 4.0, WCF netMsmq): counting aborted receives, retries and poison moves.

Theory of operation
-------------------
Every aborted transactional receive counts: a client's abort, a disconnect,
an idle timeout, a failed commit, the abort of a prepared transaction that
received the message. :meth:`PoisonHandling.aborted` decides, for each
message the transaction held, while the abort happens:

* the message was purged meanwhile, or its queue deleted: it is released,
  nothing is counted;
* otherwise its abort count grows by one. On a queue without poison
  handling, or while the count stays within the queue's retry count, the
  message is released at once (visible again in its place) and a
  ``RecordAbort`` is queued;
* when the count passes the retry count of a queue with poison handling,
  the message stays *held* and a ``MoveMessage`` is queued: to ``;retry``
  while it has retry cycles left, else to ``;poison``. Nobody can receive
  it between the decision and the move, and a move that fails releases it.

The queued operations are not written by the abort: the abort's reply never
waits for a sync. The daemon's worker takes them (:meth:`take_unit`, one
non-atomic unit) whenever :attr:`wake` tells it there are some, writes
them, and hands the outcome back (:meth:`written`), which forgets the holds
of the moved messages (they are gone from the queue) or releases those of
the moves that failed. Nothing here can lose or duplicate a message: a
message is only ever moved by ``MoveMessage`` (one write removes and
appends it), and until that write it stays where it was. A crash before the
write loses only that abort's count, as if the crash had come first.

The counts are decided here, so they must be exact although their writes
are late. For every message with counts not yet written, the count the last
one will leave is kept in memory (with how many are outstanding); the
store's count is read only when none is. Units are written in the order
they are taken, so the expectation is what the store will hold.

Moves back from ``;retry``: the daemon asks for :meth:`retry_step` at the
due time of the first entry of the store's retry index; each step holds up
to ``RETRY_STEP`` due messages (not held by a transaction) and moves them
back to their queue, abort count reset, move count + 1; an entry whose
message has gone (received, purged, deleted) is dropped.

Moves by request, between a queue and its subqueues and out of the
dead-letter queues, are the ``moves`` module's; a transaction's abort tells
this one which of the messages it held it was moving (not an aborted
receive: not counted).

Like the rest of the core: no I/O, no clock, no logging; ``wall`` is an
argument.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass, field, replace
from typing import Final

import storage
from storage import (
    DropRetryEntry,
    MessageCounters,
    MoveMessage,
    MoveReason,
    PoisonSettings,
    QueueKind,
    QueueRecord,
    RecordAbort,
    Store,
    Unit,
    UnitOutcome,
)

from . import names
from .addressing import Addressing
from .errors import InvalidArgument
from .holds import Holds

__all__ = [
    "DEFAULT_SETTINGS",
    "RETRY_STEP",
    "PoisonHandling",
    "check_settings",
    "merge_settings",
]

#: WCF's defaults: ReceiveRetryCount 5, MaxRetryCycles 2, RetryCycleDelay 30 minutes.
DEFAULT_SETTINGS: Final = PoisonSettings(retry_count=5, retry_cycles=2, retry_delay=1800.0)
#: Due messages one retry step moves back.
RETRY_STEP: Final = 256
_MAX_U32: Final = 0xFFFFFFFF
#: The longest retry delay: about 136 years.
_MAX_DELAY: Final = float(_MAX_U32)


def check_settings(settings: PoisonSettings) -> PoisonSettings:
    """Check poison settings; returns them.

    Raises:
        InvalidArgument: a count is not 0..2**32-1, or the delay is not a
            finite number of seconds >= 0.
    """
    for name in ("retry_count", "retry_cycles"):
        value = getattr(settings, name)
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= _MAX_U32:
            msg = f"{name} must be a whole number from 0 to {_MAX_U32}, not {value!r}"
            raise InvalidArgument(msg)
    delay = settings.retry_delay
    if isinstance(delay, bool) or not isinstance(delay, int | float):
        msg = f"retry_delay must be a number of seconds, not {delay!r}"
        raise InvalidArgument(msg)
    if not 0 <= delay <= _MAX_DELAY or math.isnan(delay):
        msg = f"retry_delay must be a number of seconds from 0 to {_MAX_DELAY:.0f}, not {delay!r}"
        raise InvalidArgument(msg)
    return PoisonSettings(settings.retry_count, settings.retry_cycles, float(delay))


def merge_settings(
    current: PoisonSettings | None,
    *,
    enabled: bool | None = None,
    retry_count: int | None = None,
    retry_cycles: int | None = None,
    retry_delay: float | None = None,
) -> PoisonSettings | None:
    """The settings a queue gets: ``current`` with the values given.

    Any value given (or ``enabled=True``) turns poison handling on; what is
    not given keeps its current value, or WCF's default if it was off.
    ``enabled=False`` turns it off and takes no value. Nothing given keeps
    ``current``.

    Raises:
        InvalidArgument: values given with ``enabled=False``, or out of range.
    """
    given = (retry_count, retry_cycles, retry_delay)
    if enabled is False:
        if any(value is not None for value in given):
            msg = "poison handling is being turned off: give no retry settings with that"
            raise InvalidArgument(msg)
        return None
    if enabled is None and all(value is None for value in given):
        return current
    base = current or DEFAULT_SETTINGS
    return check_settings(
        PoisonSettings(
            base.retry_count if retry_count is None else retry_count,
            base.retry_cycles if retry_cycles is None else retry_cycles,
            base.retry_delay if retry_delay is None else retry_delay,
        )
    )


def _nothing() -> None:
    """The default :attr:`PoisonHandling.wake`."""


@dataclass(slots=True)
class _Expected:
    """A message's abort count as its queued writes will leave it."""

    abort_count: int
    outstanding: int


@dataclass(slots=True, eq=False)
class PoisonHandling:
    """Poison handling: the queues' records and messages from ``store`` (read
    only), the messages it holds in ``holds``, and queue references resolved
    by ``addressing``."""

    _store: Store
    _holds: Holds
    _addressing: Addressing
    #: Operations decided by aborts and not yet handed to the writer, in order.
    _queued: list[storage.Operation] = field(default_factory=list, init=False, repr=False)
    _expected: dict[tuple[int, int], _Expected] = field(
        default_factory=dict, init=False, repr=False
    )
    #: Called (with nothing) when operations are queued: the daemon wakes
    #: the task that writes them. The default does nothing.
    wake: Callable[[], None] = field(default=_nothing, init=False, repr=False)

    # ------------------------------------------------------------------ settings

    def settings_unit(
        self,
        reference: str,
        *,
        enabled: bool | None = None,
        retry_count: int | None = None,
        retry_cycles: int | None = None,
        retry_delay: float | None = None,
    ) -> tuple[QueueRecord, Unit]:
        """The queue and the unit that changes its poison settings (see :func:`merge_settings`).

        Raises:
            InvalidName, QueueNotFound, InvalidArgument; AccessDenied: not a
                queue with poison handling (a journal, system or subqueue).
        """
        record = self._addressing.application_queue(
            reference, "is not an application queue; it has no poison settings"
        )
        settings = merge_settings(
            record.poison,
            enabled=enabled,
            retry_count=retry_count,
            retry_cycles=retry_cycles,
            retry_delay=retry_delay,
        )
        return record, Unit((storage.SetPoisonSettings(record.name, settings),))

    def parent(self, record: QueueRecord) -> QueueRecord | None:
        """The queue a subqueue belongs to (None for another kind, or if it is gone)."""
        if record.kind is not QueueKind.SUBQUEUE or record.parent_id is None:
            return None
        return self._store.get_queue_by_id(record.parent_id)

    # ------------------------------------------------------------------ counters

    def counters(self, queue_id: int, lookup_ids: Iterable[int]) -> dict[int, MessageCounters]:
        """The counters of those messages that have any, with the abort counts
        not yet written counted."""
        ids = list(lookup_ids)
        found = self._store.message_counters(queue_id, ids)
        expected = self._expected
        if expected:
            for lookup_id in ids:
                pending = expected.get((queue_id, lookup_id))
                if pending is not None:
                    current = found.get(lookup_id, storage.NO_COUNTERS)
                    found[lookup_id] = replace(current, abort_count=pending.abort_count)
        return found

    def _stored(self, queue_id: int, lookup_id: int) -> MessageCounters:
        found = self._store.message_counters(queue_id, (lookup_id,))
        return found.get(lookup_id, storage.NO_COUNTERS)

    # ------------------------------------------------------------------ aborts

    def aborted(
        self, receives: Iterable[tuple[int, int]], uncounted: Collection[tuple[int, int]] = ()
    ) -> set[int]:
        """A transaction that held these messages aborted: count, release or move
        each (see the module docstring); ``uncounted`` were held by a move, not a
        receive. Returns the queues whose readers should wake."""
        store = self._store
        released: list[tuple[int, int]] = []
        for key in receives:
            queue_id, lookup_id = key
            queue = store.get_queue_by_id(queue_id)
            if queue is None or lookup_id < queue.purged_below or key in uncounted:
                released.append(key)
                continue
            expected = self._expected.get(key)
            count = (
                self._stored(queue_id, lookup_id).abort_count
                if expected is None
                else expected.abort_count
            ) + 1
            target = self._destination(queue, lookup_id, count)
            if target is None:
                if expected is None:
                    self._expected[key] = _Expected(count, 1)
                else:
                    expected.abort_count = count
                    expected.outstanding += 1
                self._queued.append(RecordAbort(queue_id, lookup_id))
                released.append(key)
            else:
                self._queued.append(MoveMessage(queue_id, lookup_id, *target))
        if self._queued:
            self.wake()
        return self._holds.release(released)

    def _destination(
        self, queue: QueueRecord, lookup_id: int, count: int
    ) -> tuple[int, MoveReason] | None:
        """Where poison handling sends a message aborted ``count`` times, or None."""
        poison = queue.poison
        if queue.kind is not QueueKind.NORMAL or poison is None or count <= poison.retry_count:
            return None
        cycles = self._stored(queue.queue_id, lookup_id).retry_cycles
        suffix, reason = (
            (names.RETRY_SUFFIX, MoveReason.RETRY)
            if cycles < poison.retry_cycles
            else (names.POISON_SUFFIX, MoveReason.POISON)
        )
        sub = self._store.get_queue(queue.name + suffix)
        return None if sub is None else (sub.queue_id, reason)

    @property
    def wanted(self) -> bool:
        """True when aborts have queued operations that :meth:`take_unit` gives."""
        return bool(self._queued)

    def take_unit(self) -> Unit | None:
        """The queued operations as one non-atomic unit for the writer (None if none).

        The caller must write it and give the outcome to :meth:`written`.
        """
        if not self._queued:
            return None
        ops = tuple(self._queued)
        self._queued.clear()
        return Unit(ops, atomic=False)

    def written(self, unit: Unit, outcome: UnitOutcome | BaseException) -> set[int]:
        """A unit from :meth:`take_unit` or :meth:`retry_step` was written (or failed
        as a whole): forget or release what its moves held. Returns the queues
        whose readers should wake."""
        holds = self._holds
        results = (None,) * len(unit.ops) if isinstance(outcome, BaseException) else outcome.results
        woken: set[int] = set()
        released: list[tuple[int, int]] = []
        for op, result in zip(unit.ops, results, strict=True):
            if isinstance(op, RecordAbort):
                key = (op.queue_id, op.lookup_id)
                expected = self._expected.get(key)
                if expected is not None:
                    expected.outstanding -= 1
                    if expected.outstanding <= 0:
                        del self._expected[key]
            elif isinstance(op, MoveMessage):
                if isinstance(result, storage.Moved):
                    holds.forget(op.queue_id, op.lookup_id)
                    holds.moved_in(op.target_id)
                    woken.add(op.target_id)
                else:
                    released.append((op.queue_id, op.lookup_id))
        return woken | holds.release(released)

    # ------------------------------------------------------------------ returns from ;retry

    def retry_step(self, wall: float, limit: int = RETRY_STEP) -> Unit | None:
        """A bounded step moving back the messages due in ``;retry`` at ``wall``
        (unix seconds), or None if none is due. Its outcome goes to :meth:`written`."""
        store = self._store
        holds = self._holds
        ops: list[storage.Operation] = []
        for due, queue_id, lookup_id in store.retries_due(wall, limit):
            queue = store.get_queue_by_id(queue_id)
            parent = None if queue is None else self.parent(queue)
            if parent is None or store.read_message(queue_id, lookup_id) is None:
                ops.append(DropRetryEntry(due, queue_id, lookup_id))
                continue
            if holds.is_held(queue_id, lookup_id):
                continue  # a transaction received it from ;retry; its end decides
            holds.hold(queue_id, lookup_id)
            ops.append(MoveMessage(queue_id, lookup_id, parent.queue_id, MoveReason.RETURN))
        return Unit(tuple(ops), atomic=False) if ops else None

    def next_due(self) -> float | None:
        """Unix seconds when the first message in a ``;retry`` is due, or None."""
        first = self._store.retries_due(None, 1)
        return first[0][0] / 1000.0 if first else None
