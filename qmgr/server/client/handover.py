"""Handing a sent message straight to a receive that waits for it.

Theory of operation
-------------------
A receive outside a transaction that finds its queue empty waits for the
queue's signal; the message that ends the wait is written by its sender's
commit, then taken and removed by a second write. Each write is a synced
commit, so the message's way from the sender's commit to the receiver is
two syncs long. Handed over, it is one: the sender's write appends the
message and removes it for the receive together (``storage.HandedMessage``),
and once that write is synced both are answered.

1. A waiting receive that may be handed a message registers here
   (:meth:`Handover.wait`): outside a transaction, not a peek, not a receive
   by lookup id, with the queue as it found it empty.
2. A commit or a send outside a transaction, before its unit is submitted,
   asks :meth:`Handover.claim`: the first append of the unit to each queue
   with a registered receive becomes a ``HandedMessage`` for the longest
   waiting one, which is claimed (no other unit can claim it), with the
   receipt acknowledgments its removal would write.
3. When the batch holding the unit is planned, the receive is asked whether
   it still takes the message (:meth:`WaitingReceive.takes`): only if the
   queue's next lookup id in the batch is still the one it found (no message
   was appended since, in an earlier batch or earlier in this one: it would
   have found that one first), its queue's signal has not been set since
   (a transaction's abort made a message free again), and its connection
   is not closing nor the receive cancelled (``CancelReceive``).
4. Once the write is done, the sender's handler settles the claims
   (:meth:`Handover.settle`): a ``storage.Handed`` result goes to the
   receive, which answers with it; anything else (appended instead, the
   unit failed, the write failed) releases the receive, which goes on
   waiting and finds the appended message the usual way.

What a receive answers and writes is the same either way: the message's
lookup id, its journal copy and its receipt acknowledgments. A crash
before the sync loses neither the send nor the receive, as neither was
answered; a receive whose connection closes while the write holding its
message is on its way loses that message, as it would its own removal.

Within one batch, the message is the first appended to its queue, and the
receive is served between its unit and the next: on a queue read by
priority, a message of higher priority sent by a later unit of the same
batch stays for the next receive, as if that unit had been written after.
A message whose hold ends only when a write returns (a failed write's, or
a prepared transaction's that is resolved as aborted) may be passed over
by a handover planned before its release, as it may by any receive that
runs before it.

**One wakes at a time.** The registered receives of a queue are its *line*,
longest waiting first. A change to the queue (``QueueSignals.notify``) wakes
the first of the line only (:meth:`Handover.wake`), which looks for a
message; once it has taken one it passes the turn on (:meth:`Handover.pass_on`:
the next one looks, there may be more), and so does one woken that stops
waiting without looking (its deadline, a cancel, its connection closing).
One that finds nothing takes its place again, first in line. The others'
signals are renewed: the change is the first one's to look at, not a reason
for them to refuse a message handed to them. So a message costs the work of
one or two receives however many wait, where waking all would cost each of
them a look (and tens of thousands of receives may wait on one queue). A
change that concerns every receive (the queue deleted, a permission
changed, the daemon stopping) wakes the whole line (``everyone``).
"""

from __future__ import annotations

import enum
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field

import trio

import storage
from qmgr.core.engine import QueueManagerCore
from qmgr.core.errors import QueueManagerError
from storage import QueueRecord, Unit

__all__ = ["Handover", "WaitingReceive"]


class _Stage(enum.Enum):
    WAITING = enum.auto()
    #: A sender's unit holds a HandedMessage for it.
    CLAIMED = enum.auto()
    #: The message was handed over (``lookup_id`` and ``record`` are set).
    HANDED = enum.auto()
    #: It stopped waiting.
    GONE = enum.auto()


@dataclass(eq=False, slots=True)
class WaitingReceive:
    """A receive outside a transaction waiting on an empty queue (a ``storage.Taker``)."""

    #: The queue as the receive found it empty.
    queue: QueueRecord
    #: The queue's signal as it found it empty (renewed while it waits in line
    #: and another looks): once set, a message may be free that it must look for.
    signal: trio.Event
    #: True once its connection is closing or the receive was cancelled.
    leaving: Callable[[], bool]
    stage: _Stage = _Stage.WAITING
    #: What it waits on: set when it is its turn to look (first in line at a
    #: change, or the whole line), or when a claim on it ends.
    wake: trio.Event = field(default_factory=trio.Event)
    #: Set when a claim on it ends (handed over, or released).
    settled: trio.Event = field(default_factory=trio.Event)
    #: The handed message's lookup id and record (once ``handed``).
    lookup_id: int = 0
    record: bytes = b""

    @property
    def claimed(self) -> bool:
        """A sender's write may hand it a message: wait for :attr:`settled`."""
        return self.stage is _Stage.CLAIMED

    @property
    def handed(self) -> bool:
        """It was handed a message (:attr:`lookup_id`, :attr:`record`)."""
        return self.stage is _Stage.HANDED

    def takes(self, next_lookup_id: int) -> bool:
        """Asked as the sender's batch is planned, with the queue's next lookup
        id there (see the module docstring)."""
        return (
            self.stage is _Stage.CLAIMED
            and next_lookup_id == self.queue.next_lookup_id
            and not self.signal.is_set()
            and not self.leaving()
        )


class Handover:
    """The receives that may be handed a message, by queue (see the module docstring)."""

    def __init__(self, core: QueueManagerCore, signal: Callable[[int], trio.Event]) -> None:
        self._core = core
        #: The queue's current signal (``QueueSignals.event``).
        self._signal = signal
        #: The lines, by queue: registered receives, longest waiting first.
        self._waiting: dict[int, OrderedDict[WaitingReceive, None]] = {}

    def waiting(self, queue_id: int) -> int:
        """How many receives on the queue may be handed a message now."""
        return len(self._waiting.get(queue_id, ()))

    def wait(
        self,
        queue: QueueRecord,
        signal: trio.Event,
        leaving: Callable[[], bool],
        *,
        first: bool = False,
    ) -> WaitingReceive:
        """Register a receive about to wait on ``queue``, which it has just found
        empty with ``signal`` current (``leaving``: its connection is closing, or
        it was cancelled), last in line, or ``first`` (it waited before and
        looked in vain); it waits for its :attr:`WaitingReceive.wake` and must
        call :meth:`leave` when it stops waiting."""
        receive = WaitingReceive(queue, signal, leaving)
        self._enter(receive, first=first)
        return receive

    def leave(self, receive: WaitingReceive) -> None:
        """``receive`` stops waiting: it is not handed anything any more (a claim
        on it not yet planned appends its message instead)."""
        if receive.stage is _Stage.WAITING:
            self._unregister(receive)
        if receive.stage is not _Stage.HANDED:
            receive.stage = _Stage.GONE

    def claim(self, unit: Unit) -> tuple[Unit, list[tuple[int, WaitingReceive]]]:
        """Turn the first append of ``unit`` to each queue with a waiting receive
        into a ``HandedMessage`` for the longest waiting one.

        Returns:
            The unit to submit (``unit`` itself if nothing was claimed), and
            each claim as (index of its operation, receive), for :meth:`settle`.
        """
        waiting = self._waiting
        if not waiting:
            return unit, []
        ops = list(unit.ops)
        claims: list[tuple[int, WaitingReceive]] = []
        core = self._core
        wall = time.time()
        for index, op in enumerate(ops):
            if type(op) is not storage.AppendMessage or op.queue_id not in waiting:
                continue
            receive = self._next(op.queue_id)
            if receive is None:
                continue
            try:
                # Its receipt reports read the message, not where it is stored.
                reports = core.receipt_reports(receive.queue, op.record(wall), wall=wall)
            except QueueManagerError:
                # No message id for an acknowledgment now (ids being reserved):
                # appended, and the receive waits on.
                self._enter(receive, first=True)
                continue
            receive.stage = _Stage.CLAIMED
            journal = core.holds.journaled(op.queue_id)
            ops[index] = storage.HandedMessage.of(
                op, journal=journal, reports=tuple(reports), taker=receive
            )
            claims.append((index, receive))
        if not claims:
            return unit, claims
        return Unit(tuple(ops), atomic=unit.atomic), claims

    def settle(
        self,
        claims: list[tuple[int, WaitingReceive]],
        outcome: storage.UnitOutcome | None,
    ) -> set[int]:
        """End the claims of a unit that was written with ``outcome`` (None: the
        write failed, or never happened); returns the queues to wake."""
        woken: set[int] = set()
        for index, receive in claims:
            result = None if outcome is None or outcome.error else outcome.results[index]
            if isinstance(result, storage.Handed):
                woken |= self._core.handed(result.queue_id)
                woken.update(result.reported)
                # GONE: its connection closed while the write was on its way; as
                # for a removal then, the message is gone with the answer.
                if receive.stage is not _Stage.GONE:
                    receive.stage = _Stage.HANDED
                    receive.lookup_id = result.lookup_id
                    receive.record = result.record
                    receive.wake.set()
            elif receive.stage is _Stage.CLAIMED:
                if receive.signal.is_set():
                    # The queue changed while the claim was on its way (an abort
                    # made a message free): it looks for itself.
                    receive.stage = _Stage.GONE
                    receive.wake.set()
                else:
                    receive.stage = _Stage.WAITING
                    self._enter(receive, first=True)
            receive.settled.set()
            receive.settled = trio.Event()
        return woken

    def wake(self, queue_ids: tuple[int, ...] | None, everyone: bool) -> None:
        """A change to these queues (None: to all): wake the first receive of each
        line, or ``everyone`` (``QueueSignals.line``; see the module docstring)."""
        if queue_ids is None:
            queue_ids = tuple(self._waiting)
        for queue_id in queue_ids:
            line = self._waiting.get(queue_id)
            if line is None:
                continue
            if everyone:
                del self._waiting[queue_id]
                for receive in line:
                    receive.stage = _Stage.GONE
                    receive.wake.set()
                continue
            self._wake_first(queue_id, line)
            # The change is the woken one's to look at: the others' signal is
            # the queue's next one.
            if line:
                fresh = self._signal(queue_id)
                for receive in line:
                    receive.signal = fresh

    def pass_on(self, queue_id: int) -> None:
        """A receive took a message of the queue (or was woken and stops waiting
        without looking): the first of the line looks next, there may be more."""
        line = self._waiting.get(queue_id)
        if line is not None:
            self._wake_first(queue_id, line)

    def _wake_first(self, queue_id: int, line: OrderedDict[WaitingReceive, None]) -> None:
        """Wake the first receive of ``line`` that is not leaving (those that are
        leave it on the way)."""
        while line:
            receive, _ = line.popitem(last=False)
            receive.stage = _Stage.GONE
            receive.wake.set()
            if not receive.leaving():
                break
        if not line:
            del self._waiting[queue_id]

    def _enter(self, receive: WaitingReceive, *, first: bool) -> None:
        """``receive`` waits in its queue's line: last, or ``first`` (it waited
        before, and its claim or look ended without a message)."""
        line = self._waiting.setdefault(receive.queue.queue_id, OrderedDict())
        line[receive] = None
        if first:
            line.move_to_end(receive, last=False)

    def _next(self, queue_id: int) -> WaitingReceive | None:
        """The longest waiting receive on the queue whose signal is not set, taken
        out of the registry (one whose signal is set, or that is leaving, is
        dropped and woken: it looks at the queue itself)."""
        line = self._waiting[queue_id]
        while line:
            receive, _ = line.popitem(last=False)
            if not receive.signal.is_set() and not receive.leaving():
                if not line:
                    del self._waiting[queue_id]
                return receive
            # Its signal was set (a change it must look at), or it is closing.
            receive.stage = _Stage.GONE
            receive.wake.set()
        del self._waiting[queue_id]
        return None

    def _unregister(self, receive: WaitingReceive) -> None:
        line = self._waiting.get(receive.queue.queue_id)
        if line is None or receive not in line:
            return
        del line[receive]
        if not line:
            del self._waiting[receive.queue.queue_id]
