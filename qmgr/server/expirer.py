"""The daemon's expiry task: removes messages whose time to be received has passed.

Theory of operation
-------------------
One loop around :class:`qmgr.core.expiry.Expiry`: it asks the core for a step
(at most :data:`STEP` due messages, found by the store's expiry index, never
by a scan), writes each expired message's unit (its removal and the reports
of its fate) through the committer, all of the step's units at once so that
they share batches and syncs with everyone else's, and gives each outcome
back to the core. When no due message is left it sleeps until the next
deadline in the index, but never longer than :data:`POLL_SECONDS` (a message
committed meanwhile with an earlier deadline is then found in time), and
while transactions hold due messages it looks again every
``expiry.RETRY_SECONDS``. A message thus leaves within about a second of its
deadline. One ``messages_expired`` event per step says how many.
"""

from __future__ import annotations

import time
from typing import Final

import structlog
import trio
import trio.lowlevel

import storage
from qmgr.core.engine import QueueManagerCore
from qmgr.core.errors import ShuttingDown
from qmgr.core.expiry import RETRY_SECONDS

from .committer import Committer
from .outgoing_expiry import expire_outgoing
from .peering import Peering
from .signals import QueueSignals

__all__ = ["POLL_SECONDS", "STEP", "Expirer"]

#: Most messages expired per step.
STEP: Final = 512
#: Longest sleep between looks at the index.
POLL_SECONDS: Final = 1.0


class Expirer:
    """Run :meth:`run` in a nursery."""

    def __init__(
        self,
        *,
        core: QueueManagerCore,
        committer: Committer,
        signals: QueueSignals,
        log: structlog.typing.FilteringBoundLogger | None = None,
    ) -> None:
        self._core = core
        self._committer = committer
        self._signals = signals
        self._log = log or structlog.get_logger("qmgr.expiry")
        #: Gives up due outgoing entries that were never sent (set by the daemon).
        self.peering: Peering | None = None
        #: Messages expired since the start.
        self.expired = 0

    async def run(self) -> None:
        """Expire messages until cancelled."""
        while True:
            try:
                more, held = await self.step(time.time())
            except ShuttingDown:
                return
            if more:
                await trio.lowlevel.checkpoint()  # let the others in between steps
                continue
            wall = time.time()
            upcoming = self._core.expiry.next_deadline(wall)
            delay = POLL_SECONDS if upcoming is None else max(0.0, upcoming - wall)
            await trio.sleep(min(delay, RETRY_SECONDS if held else POLL_SECONDS))

    async def step(self, wall: float) -> tuple[bool, int]:
        """Expire what is due at ``wall`` (one step); returns whether more is due
        now and how many due messages transactions hold."""
        expiry = self._core.expiry
        step = expiry.step(wall, STEP)
        woken: set[int] = set()
        expired = 0

        async def write(index: int) -> None:
            nonlocal expired
            message = step.messages[index]
            try:
                outcome = await self._committer.submit(step.units[index])
            except BaseException as exc:
                woken.update(expiry.done(message, exc))
                if not isinstance(exc, storage.StoreError | ShuttingDown):
                    raise
                return
            woken.update(expiry.done(message, outcome))
            cleanup = isinstance(step.units[index].ops[0], storage.ForgetExpiry)
            if outcome.error is None and not cleanup:
                expired += 1
            elif not isinstance(outcome.error, storage.ConfirmationMissing):
                # A copy settled by its FinalAck in the meantime is no failure.
                self._log.warning("message_expiry_failed", entry=message, error=str(outcome.error))

        async with trio.open_nursery() as nursery:
            for index in range(len(step.units)):
                nursery.start_soon(write, index)
        if step.outgoing and self.peering is not None:
            expired += await expire_outgoing(self.peering, step.outgoing)
        if woken:
            self._signals.notify(woken)
        if expired:
            self.expired += expired
            self._log.info("messages_expired", count=expired, held=step.held)
        return step.more, step.held
