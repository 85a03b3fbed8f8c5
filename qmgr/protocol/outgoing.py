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

Entry life (the table ``_TRANSITIONS`` below)::

    WAITING --transmit--> SENT --unsend (connection lost, resend timer)--> WAITING
    WAITING, SENT --ack--> DONE                 (the acknowledgement that ends it)
    WAITING, SENT, DONE --forget_start--> FORGETTING --forget_fail--> DONE
    any state --forgotten / removed--> (gone)

What ends an entry depends on its kind: TRANSACTIONAL, an OrderAck of the
current sequence covering its number (end to end: the destination has it for
good); RECOVERABLE and RELAYED, a SessionAck marking it persisted; EXPRESS,
any SessionAck covering it. DONE entries are never sent again; the caller
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
import enum
import heapq
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Final

import wire

__all__ = [
    "MAX_SEQUENCE_NUMBER",
    "RESEND_INTERVALS",
    "EntryKind",
    "OutgoingSequence",
    "SequenceError",
    "Transmission",
]

#: MSMQ's Transactional Ack Wait intervals in seconds (``SeqResend13Time``,
#: ``SeqResend46Time``, ``SeqResend79Time``, ``SeqResend10Time``; reference §15.5).
RESEND_INTERVALS: Final[tuple[float, ...]] = (30.0,) * 3 + (300.0,) * 3 + (1800.0,) * 3 + (21600.0,)

#: The largest TxSequenceNumber (a u32; the first of a sequence is 1).
MAX_SEQUENCE_NUMBER: Final = 0xFFFFFFFF


class SequenceError(ValueError):
    """An EOD sequence machine was used wrongly by its caller (never raised for a peer's input).

    Lookup ids out of order, a forget result that matches no forget, a
    sequence state that goes backwards, a persist never accepted, a malformed
    stream key. An old OrderAck is ignored, an out-of-order message rejected.
    """


class EntryKind(enum.Enum):
    """What an outgoing entry is, which decides what ends it."""

    #: A transactional message of this QM: numbered, ended by an OrderAck.
    TRANSACTIONAL = "transactional"
    #: Non-transactional, recoverable: ended by a SessionAck marking it persisted.
    RECOVERABLE = "recoverable"
    #: Non-transactional, express: ended by any SessionAck covering it.
    EXPRESS = "express"
    #: A packet passing through for another source, its TransactionHeader
    #: untouched: ended by a SessionAck marking it persisted; no EOD here.
    RELAYED = "relayed"


@dataclass(frozen=True, slots=True)
class Transmission:
    """One entry to put on the wire now.

    Attributes:
        lookup_id: the entry's lookup id in the outgoing queue.
        kind: its kind.
        header: the TransactionHeader to send it with (TRANSACTIONAL only,
            else None; a RELAYED packet keeps the header it came with).
    """

    lookup_id: int
    kind: EntryKind
    header: wire.TransactionHeader | None


_State = enum.Enum("_State", "WAITING SENT DONE FORGETTING")
_Input = enum.Enum("_Input", "TRANSMIT UNSEND ACK FORGET_START FORGET_FAIL")


#: The life of one entry: (state, input) -> new state. A missing pair is a
#: bug here (the public methods check their inputs first). Leaving the table
#: (forgotten, removed) is allowed from every state and is not a transition.
_TRANSITIONS: Final[dict[tuple[_State, _Input], _State]] = {
    (_State.WAITING, _Input.TRANSMIT): _State.SENT,
    (_State.SENT, _Input.UNSEND): _State.WAITING,
    (_State.WAITING, _Input.ACK): _State.DONE,
    (_State.SENT, _Input.ACK): _State.DONE,
    (_State.WAITING, _Input.FORGET_START): _State.FORGETTING,
    (_State.SENT, _Input.FORGET_START): _State.FORGETTING,
    (_State.DONE, _Input.FORGET_START): _State.FORGETTING,
    (_State.FORGETTING, _Input.FORGET_FAIL): _State.DONE,
}

_LIVE: Final = frozenset({_State.WAITING, _State.SENT})


@dataclass(slots=True)
class _Entry:
    lookup_id: int
    kind: EntryKind
    state: _State = _State.WAITING
    #: True once it went out (so the receiver may have it).
    transmitted: bool = False


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

    Raises:
        SequenceError: a negative base, or no (or a non-positive) interval.
    """

    def __init__(
        self,
        *,
        sequence_id: wire.TxSequenceId,
        base: int,
        resend_intervals: Sequence[float] = RESEND_INTERVALS,
    ) -> None:
        intervals = tuple(float(interval) for interval in resend_intervals)
        if base < 0 or not intervals or min(intervals) <= 0:
            msg = f"need base >= 0 and positive resend intervals, not {base}, {intervals!r}"
            raise SequenceError(msg)
        self._sequence_id = sequence_id
        self._base = base
        self._intervals = intervals
        self._entries: dict[int, _Entry] = {}
        # The highest lookup id added or the base: lower ids not in the table are gone.
        self._highest = base
        # Min-heaps of WAITING lookup ids; stale ids are skipped when met.
        self._waiting_tx: list[int] = []
        self._waiting_other: list[int] = []
        self._waiting = 0
        # Lookup ids of the live (WAITING or SENT) TRANSACTIONAL entries, sorted.
        self._live_tx: list[int] = []
        self._sent_tx = 0
        self._tx_count = 0
        self._forgetting = 0
        self._batches: list[_Batch] = []
        self._wait_since: float | None = None
        self._resend_index = 0
        self._last_order_ack = 0
        self._last_order_ack_time: float | None = None

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
        return self._highest + 1 - self._base

    @property
    def waiting(self) -> int:
        """Entries waiting to be sent (for the first time, or again)."""
        return self._waiting

    @property
    def unacknowledged(self) -> int:
        """Entries in the table not waiting to be sent: sent and not yet forgotten."""
        return len(self._entries) - self._waiting

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
        return len(self._entries)

    # ------------------------------------------------------------------ entries

    def add(self, lookup_id: int, kind: EntryKind) -> None:
        """Add a committed entry (or one loaded at start); it waits to be sent.

        Raises:
            SequenceError: ``lookup_id`` is not above every id added before
                and above the base.
        """
        if lookup_id <= self._highest:
            msg = (
                f"lookup ids must increase and exceed the base ({self._base}): "
                f"{lookup_id} after {self._highest}"
            )
            raise SequenceError(msg)
        self._entries[lookup_id] = _Entry(lookup_id, kind)
        self._highest = lookup_id
        self._waiting += 1
        if kind is EntryKind.TRANSACTIONAL:
            heapq.heappush(self._waiting_tx, lookup_id)
            self._live_tx.append(lookup_id)
            self._tx_count += 1
        else:
            heapq.heappush(self._waiting_other, lookup_id)

    def next_transmission(self, now: float) -> Transmission | None:
        """The next entry to send, now marked SENT; None if nothing can go now.

        That is the oldest WAITING entry in lookup order, passing over
        TRANSACTIONAL ones while a roll is pending. Call it until it returns
        None, and again after any other input.

        Raises:
            SequenceError: the entry's number would exceed 0xFFFFFFFF.
        """
        other = self._first_waiting(self._waiting_other)
        tx = None if self.roll_pending else self._first_waiting(self._waiting_tx)
        if tx is not None and (other is None or tx < other):
            entry = self._entries[tx]
            header = self._header(tx)
            heapq.heappop(self._waiting_tx)
            if self._wait_since is None:
                self._wait_since = now
        elif other is not None:
            entry = self._entries[heapq.heappop(self._waiting_other)]
            header = None
        else:
            return None
        self._move(entry, _Input.TRANSMIT)
        entry.transmitted = True
        return Transmission(entry.lookup_id, entry.kind, header)

    def never_sent(self, lookup_id: int) -> bool:
        """True if the entry is waiting and this machine never sent it: giving it
        up (a forget) cannot take it from under the receiver."""
        entry = self._entries.get(lookup_id)
        return entry is not None and entry.state is _State.WAITING and not entry.transmitted

    def _first_waiting(self, heap: list[int]) -> int | None:
        while heap:
            entry = self._entries.get(heap[0])
            if entry is not None and entry.state is _State.WAITING:
                return heap[0]
            heapq.heappop(heap)
        return None

    def _header(self, lookup_id: int) -> wire.TransactionHeader:
        number = lookup_id - self._base
        if number > MAX_SEQUENCE_NUMBER:
            msg = f"entry {lookup_id} would be number {number} of {self._sequence_id}"
            raise SequenceError(msg)
        live = self._live_tx
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
        entry = self._entries.get(lookup_id)
        if entry is None or entry.state not in _LIVE:
            return ()
        kind = entry.kind
        if kind is EntryKind.TRANSACTIONAL or (kind is not EntryKind.EXPRESS and not persisted):
            return ()
        self._move(entry, _Input.ACK)
        return (lookup_id,)

    def order_ack(self, sequence_id: wire.TxSequenceId, number: int, now: float) -> tuple[int, ...]:
        """An OrderAck arrived: the receiver has everything up to ``number`` for good.

        One of another sequence than the current one (older, or unknown) is
        ignored. Progress (an entry ended, or a higher number) restarts the
        OrderAck wait and resets the resend backoff.

        Returns:
            The TRANSACTIONAL entries it ends (number <= ``number``), to be
            forgotten; never an id twice.
        """
        if sequence_id != self._sequence_id:
            return ()
        self._last_order_ack_time = now
        live = self._live_tx
        cut = bisect.bisect_right(live, number + self._base)
        ended = tuple(live[:cut])
        del live[:cut]
        for lookup_id in ended:
            self._move(self._entries[lookup_id], _Input.ACK)
        if ended or number > self._last_order_ack:
            self._last_order_ack = max(self._last_order_ack, number)
            self._resend_index = 0
            self._wait_since = now if self._sent_tx else None
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
        if len(set(ids)) != len(ids) or any(self._forgetting_now(i) for i in ids):
            msg = f"cannot start forgetting {ids!r}: repeated, or already being forgotten"
            raise SequenceError(msg)
        unlive: set[int] = set()
        for lookup_id in ids:
            entry = self._entries.get(lookup_id)
            if entry is None:
                continue
            if entry.kind is EntryKind.TRANSACTIONAL and entry.state in _LIVE:
                unlive.add(lookup_id)
            self._move(entry, _Input.FORGET_START)
        self._unlive(unlive)
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
        for lookup_id in ids:
            entry = self._entries.get(lookup_id)
            if entry is not None and entry.state is _State.FORGETTING:
                self._move(entry, _Input.FORGET_FAIL)

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

        Raises:
            SequenceError: the state goes backwards (an older id, another base
                under the same id, a smaller base), an id was never added, or
                the ids mix part of a forget in flight with others.
        """
        ids = frozenset(lookup_ids)
        self._check_known(ids)
        current = self._sequence_id
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
        if self._pop_batch(ids) is None and any(self._forgetting_now(i) for i in ids):
            msg = f"forgotten {sorted(ids)!r} is part of a forget in flight, not all of one"
            raise SequenceError(msg)
        if state_sequence_id == current:
            self._drop(ids)
        else:
            self._drop(ids.union(i for i in self._entries if i <= state_base))
            self._sequence_id = state_sequence_id
            self._base = state_base
            self._highest = max(self._highest, state_base)
            self._last_order_ack = 0
            self._last_order_ack_time = None
            self._resend_index = 0
            # Only when the caller broke the purge-before-forget order: nothing
            # stays SENT under the old sequence.
            for entry in self._entries.values():
                if entry.state is _State.SENT and entry.kind is EntryKind.TRANSACTIONAL:
                    self._unsend(entry)
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
        self._drop(ids)
        self._after_leaving()

    # ------------------------------------------------------------------ connection and timer

    def connection_lost(self) -> None:
        """The connection is gone: everything sent and not acknowledged goes again.

        TRANSACTIONAL entries keep their numbers (their previous numbers are
        computed afresh when they go).
        """
        for entry in self._entries.values():
            if entry.state is _State.SENT:
                self._unsend(entry)
        self._wait_since = None

    def next_deadline(self) -> float | None:
        """When :meth:`timer` has something to do (the OrderAck wait's end), or None."""
        if self._wait_since is None or not self._sent_tx:
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
        for lookup_id in self._live_tx:
            entry = self._entries[lookup_id]
            if entry.state is _State.SENT:
                self._unsend(entry)
        self._wait_since = None
        self._resend_index = min(self._resend_index + 1, len(self._intervals) - 1)

    # ------------------------------------------------------------------ internals

    def _check_known(self, lookup_ids: Iterable[int]) -> None:
        unknown = sorted(i for i in lookup_ids if i > self._highest)
        if unknown:
            msg = f"entries {unknown!r} were never added (highest {self._highest})"
            raise SequenceError(msg)

    def _forgetting_now(self, lookup_id: int) -> bool:
        entry = self._entries.get(lookup_id)
        return entry is not None and entry.state is _State.FORGETTING

    def _pop_batch(self, ids: frozenset[int]) -> _Batch | None:
        for index, batch in enumerate(self._batches):
            if batch.ids == ids:
                return self._batches.pop(index)
        return None

    def _unsend(self, entry: _Entry) -> None:
        self._move(entry, _Input.UNSEND)
        heap = self._waiting_tx if entry.kind is EntryKind.TRANSACTIONAL else self._waiting_other
        heapq.heappush(heap, entry.lookup_id)

    def _move(self, entry: _Entry, event: _Input) -> None:
        old = entry.state
        new = _TRANSITIONS.get((old, event))
        if new is None:  # pragma: no cover - the public methods check first
            msg = f"entry {entry.lookup_id}: no transition for {event.name} in {old.name}"
            raise AssertionError(msg)
        entry.state = new
        self._waiting += (new is _State.WAITING) - (old is _State.WAITING)
        self._forgetting += (new is _State.FORGETTING) - (old is _State.FORGETTING)
        if entry.kind is EntryKind.TRANSACTIONAL:
            self._sent_tx += (new is _State.SENT) - (old is _State.SENT)

    def _drop(self, ids: Iterable[int]) -> None:
        """Entries leave the table (forgotten or removed), whatever their state."""
        unlive: set[int] = set()
        for lookup_id in ids:
            entry = self._entries.pop(lookup_id, None)
            if entry is None:
                continue
            state = entry.state
            self._waiting -= state is _State.WAITING
            self._forgetting -= state is _State.FORGETTING
            if entry.kind is EntryKind.TRANSACTIONAL:
                self._tx_count -= 1
                self._sent_tx -= state is _State.SENT
                if state in _LIVE:
                    unlive.add(lookup_id)
        self._unlive(unlive)

    def _unlive(self, ids: set[int]) -> None:
        """Take TRANSACTIONAL entries that stop being live out of ``_live_tx``."""
        if len(ids) > 8:
            self._live_tx = [i for i in self._live_tx if i not in ids]
            return
        live = self._live_tx
        for lookup_id in ids:
            index = bisect.bisect_left(live, lookup_id)
            if index < len(live) and live[index] == lookup_id:
                del live[index]

    def _after_leaving(self) -> None:
        """Entries left the live set: settle the wait, the backoff and a possible roll."""
        if not self._sent_tx:
            self._wait_since = None
        if not self._tx_count:
            self._resend_index = 0
        self._check_emptying()

    def _check_emptying(self) -> None:
        """Flag the forgets in flight whose write could leave the store's queue empty.

        That needs every entry the machine knows to be in a forget in flight
        (entries it has not loaded keep the queue non-empty). Then any of the
        forgets in flight may be the one the store writes last, so all are
        flagged, and stay so until their result comes back.
        """
        if self._batches and self._forgetting == len(self._entries):
            for batch in self._batches:
                batch.may_empty = True
