"""The sender's half of exactly-once in-order delivery (EOD), for one outgoing queue.

Theory of operation
-------------------
An :class:`OutgoingSequence` is the OutgoingMessageTable and TxOutgoingSequence
of [MS-MQQB] §3.1.1.5 for ONE outgoing queue (reference §15.2-§15.5). The
store keeps the entries (FIFO by lookup id) and the sequence state; the
machine keeps each entry's kind and where it is in its life, and decides what
goes out next, with which TransactionHeader, and what may be forgotten. Every
input is a call carrying the caller's ``now``; it never reads a clock or
touches the store.

Entry life (the table ``TRANSITIONS`` of :mod:`qmgr.protocol.outgoing_table`,
which also keeps the indexes over the entries)::

    WAITING --transmit--> SENT --unsend (connection lost, resend timer)--> WAITING
    WAITING, SENT --ack--> DONE                 (the acknowledgement that ends it)
    WAITING, SENT, DONE --forget_start--> FORGETTING --forget_fail--> DONE
    any state --forgotten / removed--> (gone)

What ends an entry depends on its kind: TRANSACTIONAL, an OrderAck of the
current sequence covering its number (end to end: the destination has it for
good); RECOVERABLE and RELAYED, a SessionAck marking it persisted; EXPRESS,
any SessionAck covering it. An OrderAck past every number that may have gone out
(sent by this machine, or by an earlier run of the daemon: ``sent_before``)
ends nothing: no receiver can hold those entries, so it comes from a
confused or forged peer. DONE entries are never sent again; the caller
writes a ``ForgetOutgoing`` of the ids the machine returned, says so with
:meth:`forget_started`, and hands back the store's result with
:meth:`forgotten`.

Numbering. A TRANSACTIONAL entry's number is ``lookup_id - base``, fixed for
life, under the TxSequenceID the store persisted with ``base``. Its
*previous* number, computed at each transmission, is the number of the
nearest earlier TRANSACTIONAL entry still *live* (WAITING or SENT), or 0, so
a resend bridges whatever left the table meanwhile. This keeps the
receiver's rule (accept iff ``number > last and previous <= last``,
reference §15.3) exactly-once and in order. While an earlier entry P is
live, ``previous >= P`` and nothing can overtake P. An entry stops being live
only when (a) an OrderAck covered it: OrderAcks are cumulative and carry the
receiver's *persisted* mark, so ``last`` is already at least its number and
it need not count while the store forgets it (counting it would give the
same answers); or (b) it is given up (purged, or forgotten unacknowledged):
an old copy of it is accepted only if nothing later was (numbers grow in
commit order), so the order holds; it is lost only if the purge wins.

Rolling. The ``ForgetOutgoing`` that leaves the queue empty rolls the
sequence (ordinal + 1, base = next lookup id - 1) in the same write, so
entries appended after that write are numbered from 1 under the new id. The
machine cannot know whether an append came before or after an in-flight
forget, so once the forgets in flight cover every entry it knows (see
``_check_emptying``) the *roll is pending*: no TRANSACTIONAL entry goes out
until :meth:`forgotten` of those forgets brings the store's ``(sequence_id,
base)``. Other kinds carry no number and are not held back. The machine never
sends on an older sequence id and ignores OrderAcks of any id but the current.

The caller must report a purge (:meth:`removed`) before the result of any
forget the store wrote after it. The opposite race (a roll reported while
entries the machine knows were already purged) is harmless: entries at or
below the new base are gone from the store and leave the table.

Resending. TRANSACTIONAL entries wait for an OrderAck. When the wait
(restarted by each OrderAck that makes progress) exceeds the current resend
interval, every SENT TRANSACTIONAL entry becomes WAITING again and the backoff
index advances (30 s x3, 300 s x3, 1800 s x3, then 21600 s). It returns to 0
on progress and when no TRANSACTIONAL entry is left (reference §15.5: advance
on timeouts without progress, not on every OrderAck as the spec's text says).
Other kinds are resent only after :meth:`connection_lost` (the session layer
closes a session whose acknowledgements stop).

Not handled here: FinalAcks and the AwaitingFinalACKTable (§15.6); the FM/LM
flags and the transaction correlator of the header (left 0, the caller may
set them); a sequence that never empties over 2**32 lookup ids (an error).
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import wire

from .outgoing_table import LIVE, EntryTable, Event, State
from .sequence_values import (
    MAX_SEQUENCE_NUMBER,
    RESEND_INTERVALS,
    EntryKind,
    SequenceError,
    Transmission,
)

__all__ = [
    "MAX_SEQUENCE_NUMBER",
    "RESEND_INTERVALS",
    "EntryKind",
    "OutgoingSequence",
    "SequenceError",
    "Transmission",
]


@dataclass(slots=True)
class _Batch:
    """One forget in flight: the ids given to forget_started()."""

    ids: frozenset[int]
    #: Its write could leave the store's queue empty (and roll the sequence).
    may_empty: bool = False


class OutgoingSequence:
    """The EOD sender state of one outgoing queue (see the module docstring).

    Args:
        sequence_id: the queue's persisted TxSequenceID.
        base: the persisted base: a TRANSACTIONAL entry's number is
            ``lookup_id - base``.
        resend_intervals: the Transactional Ack Wait backoff, in seconds; the
            last one repeats.
        sent_before: entries below this lookup id may have been sent before
            this machine was made (by an earlier run of the daemon): an
            OrderAck may cover them.

    Raises:
        SequenceError: a negative base, or no (or a non-positive) interval.
    """

    def __init__(
        self,
        *,
        sequence_id: wire.TxSequenceId,
        base: int,
        resend_intervals: Sequence[float] = RESEND_INTERVALS,
        sent_before: int = 0,
    ) -> None:
        intervals = tuple(float(interval) for interval in resend_intervals)
        if base < 0 or not intervals or min(intervals) <= 0:
            msg = f"need base >= 0 and positive resend intervals, not {base}, {intervals!r}"
            raise SequenceError(msg)
        self._sequence_id = sequence_id
        self._base = base
        self._intervals = intervals
        self._table = EntryTable(base)
        self._batches: list[_Batch] = []
        self._wait_since: float | None = None
        self._resend_index = 0
        self._last_order_ack = 0
        self._last_order_ack_time: float | None = None
        #: The highest lookup id of a TRANSACTIONAL entry that may have gone out,
        #: and of any entry.
        self._sent_through = sent_before - 1
        self._transmitted_through = sent_before - 1
        self._sent_before = sent_before

    # ------------------------------------------------------------------ status

    @property
    def sequence_id(self) -> wire.TxSequenceId:
        """The current TxSequenceID (as the store last reported it)."""
        return self._sequence_id

    @property
    def base(self) -> int:
        """The current base: a TRANSACTIONAL entry's number is ``lookup_id - base``."""
        return self._base

    @property
    def next_number(self) -> int:
        """The number the next new TRANSACTIONAL entry would get (at least 1)."""
        return self._table.highest + 1 - self._base

    @property
    def waiting(self) -> int:
        """Entries waiting to be sent (for the first time, or again)."""
        return self._table.waiting

    @property
    def never_sent_waiting(self) -> int:
        """Entries waiting to be sent that never went out (as far as is known: an
        earlier run may have sent those below ``sent_before``)."""
        return self._table.waiting - self._table.again

    @property
    def unacknowledged(self) -> int:
        """Entries that may have gone out and are not yet forgotten: those sent on
        this session, and those waiting to go again (sent on a session that closed,
        or perhaps by an earlier run), which the receiver may hold."""
        return len(self._table) - self.never_sent_waiting

    @property
    def transmitted_through(self) -> int:
        """The highest lookup id that may have gone out, of any kind (0: none):
        every entry above it was never sent."""
        return max(0, self._transmitted_through)

    @property
    def sent_number(self) -> int:
        """The highest number of the current sequence that may have gone out (0: none)."""
        return max(0, self._sent_through - self._base)

    @property
    def last_order_ack(self) -> int:
        """The highest number an OrderAck of the current sequence covered (0: none)."""
        return self._last_order_ack

    @property
    def last_order_ack_time(self) -> float | None:
        """``now`` of the last OrderAck of the current sequence, or None."""
        return self._last_order_ack_time

    @property
    def resend_index(self) -> int:
        """Where the resend backoff is in the intervals (0: the first)."""
        return self._resend_index

    @property
    def roll_pending(self) -> bool:
        """A forget in flight may roll the sequence: TRANSACTIONAL entries wait."""
        return any(batch.may_empty for batch in self._batches)

    def __len__(self) -> int:
        """Entries in the table (not yet forgotten or removed)."""
        return len(self._table)

    # ------------------------------------------------------------------ entries

    def add(self, lookup_id: int, kind: EntryKind) -> None:
        """Add a committed entry (or one loaded at start); it waits to be sent.

        Raises:
            SequenceError: ``lookup_id`` is not above every id added before
                and above the base.
        """
        highest = self._table.highest
        if lookup_id <= highest:
            msg = (
                f"lookup ids must increase and exceed the base ({self._base}): "
                f"{lookup_id} after {highest}"
            )
            raise SequenceError(msg)
        self._table.add(lookup_id, kind, transmitted=lookup_id < self._sent_before)

    def next_transmission(self, now: float) -> Transmission | None:
        """The next entry to send, now marked SENT; None if nothing can go now.

        That is the oldest WAITING entry in lookup order, passing over
        TRANSACTIONAL ones while a roll is pending. Call it until it returns
        None, and again after any other input.

        Raises:
            SequenceError: the entry's number would exceed 0xFFFFFFFF.
        """
        table = self._table
        other = table.first_waiting(transactional=False)
        tx = None if self.roll_pending else table.first_waiting(transactional=True)
        if tx is not None and (other is None or tx < other):
            header = self._header(tx)
            entry = table.transmit(tx)
            self._sent_through = max(self._sent_through, tx)
            if self._wait_since is None:
                self._wait_since = now
        elif other is not None:
            header = None
            entry = table.transmit(other)
        else:
            return None
        self._transmitted_through = max(self._transmitted_through, entry.lookup_id)
        return Transmission(entry.lookup_id, entry.kind, header)

    def never_sent(self, lookup_id: int) -> bool:
        """True if the entry is waiting and this machine never sent it: giving it
        up (a forget) cannot take it from under the receiver."""
        entry = self._table.entries.get(lookup_id)
        return entry is not None and entry.state is State.WAITING and not entry.transmitted

    def _header(self, lookup_id: int) -> wire.TransactionHeader:
        number = lookup_id - self._base
        if number > MAX_SEQUENCE_NUMBER:
            msg = f"entry {lookup_id} would be number {number} of {self._sequence_id}"
            raise SequenceError(msg)
        live = self._table.live_tx
        index = bisect.bisect_left(live, lookup_id)
        previous = live[index - 1] - self._base if index else 0
        return wire.TransactionHeader(
            sequence_id=self._sequence_id,
            sequence_number=number,
            previous_sequence_number=previous,
        )

    # ------------------------------------------------------------------ acknowledgements

    def session_acked(self, lookup_id: int, *, persisted: bool) -> tuple[int, ...]:
        """A SessionAck covered this entry; ``persisted`` if it marked it stored.

        Returns:
            The ids now done, to be forgotten: the entry if it is EXPRESS, or
            RECOVERABLE/RELAYED and ``persisted``; never a TRANSACTIONAL one
            (its OrderAck decides); never an id twice.

        Raises:
            SequenceError: ``lookup_id`` was never added.
        """
        self._check_known((lookup_id,))
        entry = self._table.entries.get(lookup_id)
        if entry is None or entry.state not in LIVE:
            return ()
        kind = entry.kind
        if kind is EntryKind.TRANSACTIONAL or (kind is not EntryKind.EXPRESS and not persisted):
            return ()
        self._table.move(entry, Event.ACK)
        return (lookup_id,)

    def order_ack(
        self, sequence_id: wire.TxSequenceId, number: int, now: float
    ) -> tuple[int, ...] | None:
        """An OrderAck arrived: the receiver has everything up to ``number`` for good.

        One of another sequence than the current one (older, or unknown) is
        ignored. Progress (an entry ended, or a higher number) restarts the
        OrderAck wait and resets the resend backoff.

        Returns:
            The TRANSACTIONAL entries it ends (number <= ``number``), to be
            forgotten; never an id twice. None, and nothing changes, for an
            OrderAck of the current sequence past every number that was ever
            sent: no receiver can have those entries, so it is not the
            receiver's (a confused or forged peer), and believing it would
            drop messages that never left.
        """
        if sequence_id != self._sequence_id:
            return ()
        if number > self.sent_number:
            return None
        self._last_order_ack_time = now
        ended = self._table.end_live_through(number + self._base)
        if ended or number > self._last_order_ack:
            self._last_order_ack = max(self._last_order_ack, number)
            self._resend_index = 0
            self._wait_since = now if self._table.sent_tx else None
        return ended

    # ------------------------------------------------------------------ forgetting

    def forget_started(self, lookup_ids: Iterable[int]) -> None:
        """A ``ForgetOutgoing`` of these ids is being written; they never go out again.

        If the forgets in flight now cover every entry the machine knows, the
        store may roll the sequence when it writes them: TRANSACTIONAL
        transmissions wait for their :meth:`forgotten`.

        Raises:
            SequenceError: an id was never added, is repeated, or is already
                being forgotten.
        """
        ids = tuple(lookup_ids)
        self._check_known(ids)
        table = self._table
        if len(set(ids)) != len(ids) or any(table.is_forgetting(i) for i in ids):
            msg = f"cannot start forgetting {ids!r}: repeated, or already being forgotten"
            raise SequenceError(msg)
        unlive: set[int] = set()
        for lookup_id in ids:
            entry = table.entries.get(lookup_id)
            if entry is None:
                continue
            if entry.kind is EntryKind.TRANSACTIONAL and entry.state in LIVE:
                unlive.add(lookup_id)
            table.move(entry, Event.FORGET_START)
        table.unlive(unlive)
        self._batches.append(_Batch(frozenset(ids)))
        self._after_leaving()

    def forget_failed(self, lookup_ids: Iterable[int]) -> None:
        """The forget of these ids (one :meth:`forget_started` batch) failed: retry it.

        Raises:
            SequenceError: no forget of exactly these ids is in flight.
        """
        ids = frozenset(lookup_ids)
        if self._pop_batch(ids) is None:
            msg = f"no forget of {sorted(ids)!r} is in flight"
            raise SequenceError(msg)
        table = self._table
        for lookup_id in ids:
            if table.is_forgetting(lookup_id):
                table.move(table.entries[lookup_id], Event.FORGET_FAIL)

    def forgotten(
        self,
        lookup_ids: tuple[int, ...],
        state_sequence_id: wire.TxSequenceId,
        state_base: int,
    ) -> None:
        """The store forgot these ids, and its sequence state is now the one given.

        ``lookup_ids`` is normally one :meth:`forget_started` batch; ids the
        store forgot without one are accepted too. A new sequence id means the
        store rolled: entries at or below the new base are gone from the store
        and leave the table, the others are numbered under the new id and base,
        and a pending roll is settled.

        Two forgets of one queue may be written in one order and their results
        come back in the other (they are written by different tasks): the
        result of a forget in flight whose state is of an older sequence than
        the machine's only ends that forget (its ids went with the roll).

        Raises:
            SequenceError: the state goes backwards (an older id, another base
                under the same id, a smaller base) other than for a forget in
                flight, an id was never added, or the ids mix part of a forget
                in flight with others.
        """
        ids = frozenset(lookup_ids)
        self._check_known(ids)
        current = self._sequence_id
        if state_sequence_id < current and self._pop_batch(ids) is not None:
            self._table.drop(ids)
            self._after_leaving()
            return
        if (
            state_sequence_id < current
            or (state_sequence_id == current and state_base != self._base)
            or state_base < self._base
        ):
            msg = (
                f"the sequence state cannot go from ({current}, base {self._base}) "
                f"to ({state_sequence_id}, base {state_base})"
            )
            raise SequenceError(msg)
        table = self._table
        if self._pop_batch(ids) is None and any(table.is_forgetting(i) for i in ids):
            msg = f"forgotten {sorted(ids)!r} is part of a forget in flight, not all of one"
            raise SequenceError(msg)
        if state_sequence_id == current:
            table.drop(ids)
        else:
            table.drop(ids.union(i for i in table.entries if i <= state_base))
            self._sequence_id = state_sequence_id
            self._base = state_base
            table.highest = max(table.highest, state_base)
            self._last_order_ack = 0
            self._last_order_ack_time = None
            self._resend_index = 0
            # Only when the caller broke the purge-before-forget order: nothing
            # stays SENT under the old sequence.
            for entry in table.entries.values():
                if entry.state is State.SENT and entry.kind is EntryKind.TRANSACTIONAL:
                    table.unsend(entry)
        self._after_leaving()

    def removed(self, lookup_ids: Iterable[int]) -> None:
        """These entries left the queue for another reason (a purge): drop them.

        Later TRANSACTIONAL entries' previous numbers bridge the hole. Call it
        before reporting any forget the store wrote after the removal.

        Raises:
            SequenceError: an id was never added.
        """
        ids = set(lookup_ids)
        self._check_known(ids)
        self._table.drop(ids)
        self._after_leaving()

    # ------------------------------------------------------------------ connection and timer

    def connection_lost(self) -> None:
        """The connection is gone: everything sent and not acknowledged goes again.

        TRANSACTIONAL entries keep their numbers (their previous numbers are
        computed afresh when they go).
        """
        table = self._table
        for entry in table.entries.values():
            if entry.state is State.SENT:
                table.unsend(entry)
        self._wait_since = None

    def next_deadline(self) -> float | None:
        """When :meth:`timer` has something to do (the OrderAck wait's end), or None."""
        if self._wait_since is None or not self._table.sent_tx:
            return None
        return self._wait_since + self._intervals[self._resend_index]

    def timer(self, now: float) -> None:
        """Transactional Ack Wait: resend every SENT TRANSACTIONAL entry if it is time.

        Each such timeout (no progress for the current interval) moves the
        backoff to the next interval. Harmless to call early or often.
        """
        deadline = self.next_deadline()
        if deadline is None or now < deadline:
            return
        table = self._table
        for lookup_id in table.live_tx:
            entry = table.entries[lookup_id]
            if entry.state is State.SENT:
                table.unsend(entry)
        self._wait_since = None
        self._resend_index = min(self._resend_index + 1, len(self._intervals) - 1)

    # ------------------------------------------------------------------ internals

    def _check_known(self, lookup_ids: Iterable[int]) -> None:
        highest = self._table.highest
        unknown = sorted(i for i in lookup_ids if i > highest)
        if unknown:
            msg = f"entries {unknown!r} were never added (highest {highest})"
            raise SequenceError(msg)

    def _pop_batch(self, ids: frozenset[int]) -> _Batch | None:
        for index, batch in enumerate(self._batches):
            if batch.ids == ids:
                return self._batches.pop(index)
        return None

    def _after_leaving(self) -> None:
        """Entries left the live set: settle the wait, the backoff and a possible roll."""
        table = self._table
        if not table.sent_tx:
            self._wait_since = None
        if not table.tx_count:
            self._resend_index = 0
        self._check_emptying()

    def _check_emptying(self) -> None:
        """Flag the forgets in flight whose write could leave the store's queue empty.

        That needs every entry the machine knows to be in a forget in flight
        (entries it has not loaded keep the queue non-empty). Then any of the
        forgets in flight may be the one the store writes last, so all are
        flagged, and stay so until their result comes back.
        """
        if self._batches and self._table.forgetting == len(self._table):
            for batch in self._batches:
                batch.may_empty = True
