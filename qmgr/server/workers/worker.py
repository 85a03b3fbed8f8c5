"""The skeleton of every background worker: a loop of steps, and how they write.

Theory of operation
-------------------
A worker is a task of the daemon's own work, done in steps with pauses in
between. What one worker does differs from another's only in its step (what
is due now, and how long until the next look); everything else is here,
once:

* :meth:`Worker.run` is the loop. It calls :meth:`Worker.step`, which
  returns the seconds until the next step: ``0`` for at once (after a
  checkpoint, so that the clients' requests get in between two steps of a
  long piece of work), ``math.inf`` for only when woken. The pause ends
  early when :meth:`Worker.wake` is called; a wake-up that comes while a
  step runs is not lost (the next pause returns at once). The loop ends
  when a step raises ``ShuttingDown`` (the committer has stopped: what is
  left is found again at the next start) or when its task is cancelled.
* :func:`submit_unit` writes one unit through the committer as the daemon's
  own work: never inline on the worker's task, so that a loop of steps
  shares the clients' batches and syncs and never keeps their requests
  waiting (``qmgr.server.committer``). What became of the unit goes back
  to the core's part that made it (``hand_back``: the outcome, the
  ``StoreError`` that failed its whole batch, or ``ShuttingDown``, which is
  raised again once handed back), the readers of the queues that part
  names are woken, and the worker gets a :class:`Written`: the outcome, and
  whether the batch failed whole (nothing of it written), which some
  workers treat apart (they look again later) from an operation that
  failed.

A worker writes in no other way, and waits only on trio's clock, so a test
drives any of them with ``trio.testing.MockClock`` and a real store.
"""

from __future__ import annotations

import abc
import math
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import ClassVar, NotRequired, TypedDict

import structlog
import trio
import trio.lowlevel

import storage
from qmgr.core.errors import ShuttingDown

from ..committer import Committer
from ..signals import QueueSignals, Wakeup

__all__ = ["UNTIL_WOKEN", "HandBack", "Worker", "WorkerParts", "Written", "submit_unit"]

#: The pause of a worker with nothing to do until it is woken.
UNTIL_WOKEN = math.inf

#: Gives what became of a unit back to the part of the core that made it
#: (an outcome, a ``StoreError`` or ``ShuttingDown``); returns the queues whose
#: readers should wake, if any.
HandBack = Callable[[storage.UnitOutcome | BaseException], Iterable[int] | None]


@dataclass(frozen=True, slots=True)
class Written:
    """What became of a unit a worker submitted.

    Attributes:
        outcome: one result per operation; every one failed or skipped when
            the batch failed whole.
        batch_error: the error that failed the unit's whole batch (nothing of
            it was written), or None.
    """

    outcome: storage.UnitOutcome
    batch_error: storage.StoreError | None = None

    @property
    def error(self) -> storage.StoreError | None:
        """Why the unit, or its first failing operation, failed; None if it was written."""
        return self.batch_error if self.batch_error is not None else self.outcome.error


async def submit_unit(
    committer: Committer,
    unit: storage.Unit,
    *,
    hand_back: HandBack | None = None,
    signals: QueueSignals | None = None,
) -> Written:
    """Write ``unit`` as the daemon's own work (see the module docstring).

    Raises:
        ShuttingDown: the committer has stopped (after ``hand_back`` got it).
    """
    try:
        outcome = await committer.submit(unit)
    except (storage.StoreError, ShuttingDown) as exc:
        woken = None if hand_back is None else hand_back(exc)
        if woken and signals is not None:
            signals.notify(woken)
        if isinstance(exc, ShuttingDown):
            raise
        return Written(storage.UnitOutcome.failed(unit, exc), exc)
    woken = None if hand_back is None else hand_back(outcome)
    if woken and signals is not None:
        signals.notify(woken)
    return Written(outcome)


class WorkerParts(TypedDict):
    """What every worker is given: the keyword arguments of :class:`Worker` that a
    worker's own constructor passes on (``**parts``)."""

    committer: Committer
    signals: QueueSignals | None
    log: NotRequired[structlog.typing.FilteringBoundLogger]
    wall: NotRequired[Callable[[], float]]


class Worker(abc.ABC):
    """One background task: :meth:`step` again and again, pausing in between.

    Args:
        committer: writes the worker's units.
        signals: wakes the readers of the queues its units touch (None: it
            touches none that readers wait on).
        log: the worker's log (default: the logger named :attr:`log_name`).
        wakeup: what :meth:`wake` sets (given when someone else holds it too).
        wall: unix time, for what the worker's steps decide by the wall clock
            (deadlines, due times, retention; the tests make it follow trio's).
    """

    #: The name of the worker's logger, unless it is given one.
    log_name: ClassVar[str] = "qmgr.worker"

    def __init__(
        self,
        *,
        committer: Committer,
        signals: QueueSignals | None,
        log: structlog.typing.FilteringBoundLogger | None = None,
        wakeup: Wakeup | None = None,
        wall: Callable[[], float] = time.time,
    ) -> None:
        self.committer = committer
        self.signals = signals
        self.log = log if log is not None else structlog.get_logger(self.log_name)
        self.wall = wall
        self._wakeup = wakeup if wakeup is not None else Wakeup()

    def notify(self, queue_ids: Iterable[int]) -> None:
        """Wake the readers of these queues."""
        if self.signals is not None:
            self.signals.notify(queue_ids)

    def wake(self) -> None:
        """Step again now (or as soon as the current step ends)."""
        self._wakeup.set()

    async def run(self) -> None:
        """Step until cancelled, or until a step finds the committer stopped."""
        while True:
            try:
                pause = await self.step()
            except ShuttingDown:
                return
            if pause <= 0:
                await trio.lowlevel.checkpoint()
            else:
                await self._wakeup.wait(pause)

    @abc.abstractmethod
    async def step(self) -> float:
        """Do what is due now; return the seconds until the next step (0: at
        once; :data:`UNTIL_WOKEN`: only when woken).

        Raises:
            ShuttingDown: the committer has stopped; the worker ends.
        """

    async def submit(self, unit: storage.Unit, hand_back: HandBack | None = None) -> Written:
        """:func:`submit_unit` with this worker's committer and signals."""
        return await submit_unit(self.committer, unit, hand_back=hand_back, signals=self.signals)
