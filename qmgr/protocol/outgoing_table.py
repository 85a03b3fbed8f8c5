"""The sender's table of outgoing entries: each entry's life, and the indexes kept over it.

Theory of operation
-------------------
An :class:`EntryTable` holds the entries of one outgoing queue that its
:class:`~qmgr.protocol.outgoing.OutgoingSequence` knows (reference §15.2).
Each entry moves through the states of the table :data:`TRANSITIONS`::

    WAITING --transmit--> SENT --unsend (connection lost, resend timer)--> WAITING
    WAITING, SENT --ack--> DONE                 (the acknowledgement that ends it)
    WAITING, SENT, DONE --forget_start--> FORGETTING --forget_fail--> DONE
    any state --drop (forgotten / removed)--> (gone)

A move that the table does not list is a bug of the sequence machine (its
public methods check their inputs first). In step with every move, the table
keeps what the machine asks of it at every transmission and acknowledgement:

* the WAITING entries in lookup order: two min-heaps, the TRANSACTIONAL ones
  and the others (stale ids are skipped when met, so a move costs nothing
  there);
* the *live* TRANSACTIONAL entries (WAITING or SENT), sorted by lookup id:
  a transmission's previous number and an OrderAck's cut are looked up in it;
* the counts: entries waiting, being forgotten, TRANSACTIONAL ones sent, and
  TRANSACTIONAL ones in the table.

It knows nothing of numbers, sequences, time or acknowledgements: that is
the sequence machine's part.
"""

from __future__ import annotations

import bisect
import enum
import heapq
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final

from .sequence_values import EntryKind

__all__ = ["LIVE", "TRANSITIONS", "Entry", "EntryTable", "Event", "State"]

# Integer enums: each entry's sending takes several look-ups keyed by them, and
# an int's hash is computed in C where a plain Enum's is a Python call.
State = enum.IntEnum("State", "WAITING SENT DONE FORGETTING")
Event = enum.IntEnum("Event", "TRANSMIT UNSEND ACK FORGET_START FORGET_FAIL")

#: The life of one entry: for each event, the states it applies to and the state
#: it leads to. Leaving the table (forgotten, removed) is allowed from every
#: state and is not a transition.
TRANSITIONS: Final[dict[Event, dict[State, State]]] = {
    Event.TRANSMIT: {State.WAITING: State.SENT},
    Event.UNSEND: {State.SENT: State.WAITING},
    Event.ACK: dict.fromkeys((State.WAITING, State.SENT), State.DONE),
    Event.FORGET_START: dict.fromkeys((State.WAITING, State.SENT, State.DONE), State.FORGETTING),
    Event.FORGET_FAIL: {State.FORGETTING: State.DONE},
}

#: The states of an entry the receiver may still be waiting for.
LIVE: Final = frozenset({State.WAITING, State.SENT})


@dataclass(slots=True)
class Entry:
    """One outgoing entry of the table."""

    lookup_id: int
    kind: EntryKind
    state: State = State.WAITING
    #: True once it went out (so the receiver may have it).
    transmitted: bool = False


class EntryTable:
    """The entries of one outgoing queue and their indexes (see the module docstring).

    Args:
        base: the sequence's base: lookup ids at or below it are never added.
    """

    __slots__ = (
        "_waiting_other",
        "_waiting_tx",
        "again",
        "entries",
        "forgetting",
        "highest",
        "live_tx",
        "sent_tx",
        "tx_count",
        "waiting",
    )

    def __init__(self, base: int) -> None:
        self.entries: dict[int, Entry] = {}
        #: The highest lookup id added, or the base: lower ids not in the table are gone.
        self.highest = base
        #: Entries WAITING, and FORGETTING.
        self.waiting = 0
        self.forgetting = 0
        #: Of the WAITING entries, those that may have gone out before (sent on a
        #: session that closed, or perhaps by an earlier run): the receiver may have them.
        self.again = 0
        #: Lookup ids of the live (WAITING or SENT) TRANSACTIONAL entries, sorted.
        self.live_tx: list[int] = []
        #: TRANSACTIONAL entries SENT, and in the table.
        self.sent_tx = 0
        self.tx_count = 0
        # Min-heaps of WAITING lookup ids; stale ids are skipped when met.
        self._waiting_tx: list[int] = []
        self._waiting_other: list[int] = []

    def __len__(self) -> int:
        return len(self.entries)

    def add(self, lookup_id: int, kind: EntryKind, *, transmitted: bool = False) -> None:
        """A new entry, WAITING; ``lookup_id`` is above every one added before.
        ``transmitted``: it may have gone out already (an earlier run sent it)."""
        self.entries[lookup_id] = Entry(lookup_id, kind, transmitted=transmitted)
        self.highest = lookup_id
        self.waiting += 1
        self.again += transmitted
        if kind is EntryKind.TRANSACTIONAL:
            heapq.heappush(self._waiting_tx, lookup_id)
            self.live_tx.append(lookup_id)
            self.tx_count += 1
        else:
            heapq.heappush(self._waiting_other, lookup_id)

    def first_waiting(self, *, transactional: bool) -> int | None:
        """The lowest WAITING lookup id of TRANSACTIONAL entries, or of the others."""
        heap = self._waiting_tx if transactional else self._waiting_other
        entries = self.entries
        while heap:
            entry = entries.get(heap[0])
            if entry is not None and entry.state is State.WAITING:
                return heap[0]
            heapq.heappop(heap)
        return None

    def transmit(self, lookup_id: int) -> Entry:
        """The entry :meth:`first_waiting` returned goes out: it is SENT."""
        entry = self.entries[lookup_id]
        heapq.heappop(self._heap(entry))
        self.move(entry, Event.TRANSMIT)
        entry.transmitted = True
        return entry

    def unsend(self, entry: Entry) -> None:
        """A SENT entry waits to be sent again."""
        self.move(entry, Event.UNSEND)
        heapq.heappush(self._heap(entry), entry.lookup_id)

    def _heap(self, entry: Entry) -> list[int]:
        return self._waiting_tx if entry.kind is EntryKind.TRANSACTIONAL else self._waiting_other

    def is_forgetting(self, lookup_id: int) -> bool:
        """True if the entry is in the table and being forgotten."""
        entry = self.entries.get(lookup_id)
        return entry is not None and entry.state is State.FORGETTING

    def move(self, entry: Entry, event: Event) -> None:
        """Apply ``event`` to ``entry`` (see :data:`TRANSITIONS`) and keep the counts."""
        old = entry.state
        new = TRANSITIONS[event].get(old)
        if new is None:  # pragma: no cover - the sequence machine checks first
            msg = f"entry {entry.lookup_id}: no transition for {event.name} in {old.name}"
            raise AssertionError(msg)
        entry.state = new
        waiting = (new is State.WAITING) - (old is State.WAITING)
        self.waiting += waiting
        if entry.transmitted:
            self.again += waiting
        self.forgetting += (new is State.FORGETTING) - (old is State.FORGETTING)
        if entry.kind is EntryKind.TRANSACTIONAL:
            self.sent_tx += (new is State.SENT) - (old is State.SENT)

    def end_live_through(self, lookup_id: int) -> tuple[int, ...]:
        """The live TRANSACTIONAL entries at or below ``lookup_id`` stop being live
        (an OrderAck covered them): they are DONE. Returns their ids."""
        live = self.live_tx
        cut = bisect.bisect_right(live, lookup_id)
        ended = tuple(live[:cut])
        del live[:cut]
        entries = self.entries
        for ended_id in ended:
            self.move(entries[ended_id], Event.ACK)
        return ended

    def drop(self, ids: Iterable[int]) -> None:
        """Entries leave the table (forgotten or removed), whatever their state."""
        unlive: set[int] = set()
        for lookup_id in ids:
            entry = self.entries.pop(lookup_id, None)
            if entry is None:
                continue
            state = entry.state
            self.waiting -= state is State.WAITING
            self.again -= state is State.WAITING and entry.transmitted
            self.forgetting -= state is State.FORGETTING
            if entry.kind is EntryKind.TRANSACTIONAL:
                self.tx_count -= 1
                self.sent_tx -= state is State.SENT
                if state in LIVE:
                    unlive.add(lookup_id)
        self.unlive(unlive)

    def unlive(self, ids: set[int]) -> None:
        """Take TRANSACTIONAL entries that stop being live out of :attr:`live_tx`."""
        if len(ids) > 8:
            self.live_tx = [i for i in self.live_tx if i not in ids]
            return
        live = self.live_tx
        for lookup_id in ids:
            index = bisect.bisect_left(live, lookup_id)
            if index < len(live) and live[index] == lookup_id:
                del live[index]
