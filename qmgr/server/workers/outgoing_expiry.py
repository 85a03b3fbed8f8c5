"""Time to reach the queue at the source: giving up messages still in an outgoing queue.

Theory of operation
-------------------
A message this queue manager sends to another one is appended to its
outgoing queue with a deadline: its send time plus the smaller of its time
to reach the queue and its time to be received. The expiry index
(``storage.ops.expiry``) finds it when that passes, and the expirer (``expirer``)
hands it here, because only the outgoing queue's sequence machine knows
whether the message may already be at its destination.

* **Never sent** (``OutgoingSequence.never_sent``, and committed since this
  daemon started): it leaves the outgoing queue in a ``ForgetOutgoing`` of
  its own, which the machine treats like a purge (the next transmission's
  previous number bridges it, so the stream has no hole), together with its
  reports: NACK_REACH_QUEUE_TIMEOUT to the admin queue if asked, a copy with
  that class in ``system$;deadxact`` (transactional) or
  ``system$;deadletter`` with MQMSG_DEADLETTER, and the settling of its copy
  awaiting confirmation, if it has one.
* **Perhaps sent** (in flight, or sent by an earlier run of the daemon): it
  stays. The destination judges it on arrival (a message arriving after its
  time to reach the queue is refused with NACK_REACH_QUEUE_TIMEOUT and its
  FinalAck reaches the source, which then keeps the dead-letter copy), and
  if the link never comes back, its copy awaiting confirmation settles at
  its own deadline. Giving it up here could leave it both delivered and
  dead-lettered.

A plain message a router passes on (store and forward) has the same
deadline in its outgoing queue, and is given up the same way at this hop:
its NACK to its admin queue if asked, its copy in ``system$;deadletter``
with MQMSG_DEADLETTER (its source keeps none). A transactional one carries
no deadline here: its source accounts for it (its own deadline, and the
FinalAck of the destination's refusal of a message arriving too late).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol

import storage
from wire import MessageClass

from ..peering.outgoing_queue import OutgoingQueue
from ..peering.parts import PeeringParts
from ..signals import touched_queues
from .worker import submit_unit

__all__ = ["OutgoingSide", "expire_outgoing"]


class OutgoingSide(Protocol):
    """What giving up outgoing entries needs of the peering adapter (its hub)."""

    @property
    def parts(self) -> PeeringParts:
        """The daemon's parts, as the adapter has them."""
        ...

    @property
    def outgoing(self) -> Mapping[int, OutgoingQueue]:
        """Every outgoing queue, by queue id."""
        ...


async def expire_outgoing(peering: OutgoingSide, due: Sequence[storage.DueMessage]) -> int:
    """Give up the due outgoing entries that were never sent; returns how many."""
    parts = peering.parts
    given_up = 0
    for entry in due:
        queue = peering.outgoing.get(entry.queue_id)
        if queue is None or queue.purging:
            continue
        lookup_id = entry.lookup_id
        if lookup_id < queue.sent_before_start_below or not queue.machine.never_sent(lookup_id):
            continue
        unit = _give_up(queue, lookup_id)
        if unit is None:
            continue
        ids = (lookup_id,)
        queue.machine.forget_started(ids)
        written = await submit_unit(parts.committer, unit)
        result = written.outcome.results[0]
        if written.error is None and isinstance(result, storage.Forgotten):
            queue.forgotten(ids, result.state)
            parts.signals.notify(touched_queues(parts.store, unit.ops))
            given_up += 1
        else:
            queue.machine.forget_failed(ids)
            queue.wake()  # a roll that waited for this forget no longer holds entries back
            parts.log.warning("outgoing_expiry_failed", queue=queue.name, error=str(written.error))
    return given_up


def _give_up(queue: OutgoingQueue, lookup_id: int) -> storage.Unit | None:
    reports = queue.give_up_reports(lookup_id, MessageClass.NACK_REACH_QUEUE_TIMEOUT)
    if reports is None:
        return None
    return storage.Unit((storage.ForgetOutgoing(queue.queue_id, (lookup_id,)), *reports))
