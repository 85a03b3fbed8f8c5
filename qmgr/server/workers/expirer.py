"""The expirer: removes messages whose time to be received has passed.

Theory of operation
-------------------
A :class:`~.worker.Worker` around :class:`qmgr.core.expiry.Expiry`. Each
step asks the core for at most :data:`STEP` due messages (found by the
store's expiry index, never by a scan), writes each expired message's unit
(its removal and the reports of its fate) all at once, so that they share
batches and syncs with everyone else's, and gives each outcome back to the
core. Due entries of outgoing queues go to ``outgoing`` (the peering side:
only it knows whether one may already be at its destination; see
``outgoing_expiry``).

When no due message is left it pauses until the next deadline in the
index, but never longer than :data:`POLL_SECONDS` (a message committed
meanwhile with an earlier deadline is then found in time), and while
transactions hold due messages it looks again every
``expiry.RETRY_SECONDS``. A message thus leaves within about a second of
its deadline. One ``messages_expired`` event per step says how many, and
one ``message_expiry_failed`` how many could not be expired; a step none of
whose messages could be (a full store: the expiry of a message writes its
dead-letter copy and its report, so it cannot use the room kept for
removals) is tried again after :data:`FAILED_PAUSE_SECONDS`.

Units are handed to the committer in the order of the index, so that
messages that expire together keep their order in the dead-letter queue.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable, Sequence
from typing import Final, Unpack

import trio

import storage
from qmgr.core.engine import QueueManagerCore
from qmgr.core.errors import ShuttingDown
from qmgr.core.expiry import RETRY_SECONDS

from .worker import Worker, WorkerParts

__all__ = ["FAILED_PAUSE_SECONDS", "POLL_SECONDS", "STEP", "Expirer", "OutgoingExpiry"]

#: Most messages expired per step.
STEP: Final = 512
#: Longest pause between looks at the index.
POLL_SECONDS: Final = 1.0
#: The pause after a step none of whose messages could be expired (a full
#: store): they are tried again then.
FAILED_PAUSE_SECONDS: Final = 5.0

#: Gives up the due entries of outgoing queues that were never sent; returns how many.
OutgoingExpiry = Callable[[Sequence[storage.DueMessage]], Awaitable[int]]


class Expirer(Worker):
    """Expires messages; run :meth:`run` in a nursery.

    Args:
        outgoing: gives up due outgoing entries (None: the daemon has no
            peering side, as in tests).
    """

    log_name = "qmgr.expiry"

    def __init__(
        self,
        *,
        core: QueueManagerCore,
        outgoing: OutgoingExpiry | None = None,
        **parts: Unpack[WorkerParts],
    ) -> None:
        super().__init__(**parts)
        self._expiry = core.expiry
        self._store = core.store
        self._outgoing = outgoing
        #: Messages expired since the start.
        self.expired = 0

    def _named(self, counts: dict[int, int]) -> dict[str, int]:
        """``counts`` by queue name (a queue deleted meanwhile by its id)."""
        named: dict[str, int] = {}
        for queue_id, count in counts.items():
            record = self._store.get_queue_by_id(queue_id)
            name = record.name if record is not None else f"#{queue_id}"
            named[name] = named.get(name, 0) + count
        return named

    async def step(self) -> float:
        more, held, failed = await self._expire_step(self.wall())
        if failed:
            # Nothing of it could be written (a full store, say): the same due
            # messages would come back at once.
            return FAILED_PAUSE_SECONDS
        if more:
            return 0.0
        wall = self.wall()
        upcoming = self._expiry.next_deadline(wall)
        delay = POLL_SECONDS if upcoming is None else max(0.0, upcoming - wall)
        return min(delay, RETRY_SECONDS if held else POLL_SECONDS)

    async def expire(self, wall: float) -> tuple[bool, int]:
        """Expire what is due at ``wall`` (one step); returns whether more is due
        now and how many due messages transactions hold.

        Raises:
            ShuttingDown: the committer has stopped (every unit was handed back).
        """
        more, held, _ = await self._expire_step(wall)
        return more, held

    async def _expire_step(self, wall: float) -> tuple[bool, int, bool]:
        """:meth:`expire`, and whether the step wrote nothing because every
        message's unit failed."""
        expiry = self._expiry
        step = expiry.step(wall, STEP)
        expired = 0
        by_queue: dict[int, int] = {}
        failures: list[tuple[tuple[int, int] | None, storage.StoreError]] = []
        stopped: ShuttingDown | None = None

        async def write(
            unit: storage.Unit,
            message: tuple[int, int] | None,
            task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
        ) -> None:
            nonlocal expired, stopped
            # Started one after the other, each task hands its unit to the
            # committer before the next starts (``submit`` queues it before
            # its first checkpoint): messages that expire together reach the
            # dead-letter queue in the order of the index (deadline, queue,
            # lookup id), so a queue's order survives a move back.
            task_status.started()
            try:
                written = await self.submit(unit, functools.partial(expiry.done, message))
            except ShuttingDown as exc:
                stopped = exc
                return
            if written.batch_error is not None:
                return
            error = written.outcome.error
            if error is None and not isinstance(unit.ops[0], storage.ForgetExpiry):
                expired += 1
                if message is not None:
                    by_queue[message[0]] = by_queue.get(message[0], 0) + 1
            elif error is not None and not isinstance(error, storage.ConfirmationMissing):
                # A copy settled by its FinalAck in the meantime is no failure, nor
                # is a stale entries' cleanup that succeeded.
                failures.append((message, error))

        async with trio.open_nursery() as nursery:
            for unit, message in zip(step.units, step.messages, strict=True):
                await nursery.start(write, unit, message)
        if stopped is not None:
            raise stopped
        if failures:
            entry, error = failures[0]
            self.log.warning(
                "message_expiry_failed", count=len(failures), entry=entry, error=str(error)
            )
        if step.outgoing and self._outgoing is not None:
            expired += await self._outgoing(step.outgoing)
        if expired:
            self.expired += expired
            self.log.info(
                "messages_expired", count=expired, held=step.held, queues=self._named(by_queue)
            )
        failed = bool(failures) and len(failures) == len(step.units)
        return step.more, step.held, failed and not expired
