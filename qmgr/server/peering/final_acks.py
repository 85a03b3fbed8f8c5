"""FinalAcks that arrive about our messages: settling their copies awaiting confirmation.

Theory of operation
-------------------
This queue manager is the source of a transactional message that asked for
confirmation; its destination sends a FinalAck when the message leaves its
queue (or is refused there). The receiver finds the FinalAck is about one
of our messages (``qmgr.protocol.FinalAckArrived``; one about another
queue manager's message is passed on along its return path, as OrderAcks
are: a router keeps no FinalAck of its own). :class:`FinalAckArrivals` asks
the core for the unit that settles the message's copy
(``qmgr.core.confirmation.Confirmations.settle``) and stores it in the
connection's next write, as one operation that does nothing if the copy is
gone by then (its deadline may settle it first). The FinalAck counts in our
SessionAck only once that write is persisted: the destination forgets its
FinalAck on that SessionAck. A FinalAck about a copy already settled (a
repeat) stores nothing, and counts once the writes before it are persisted.

Sending our own FinalAcks (we are the destination) is the courier's work
(``qmgr.server.workers.final_ack_courier``).
"""

from __future__ import annotations

import storage
import wire
from qmgr.protocol import Role

from ..signals import touched_queues
from .connection import PeerConnection
from .parts import PeeringParts

__all__ = ["FinalAckArrivals"]


class FinalAckArrivals:
    """Settles the copies that arriving FinalAcks are about (see the module docstring).

    Args:
        parts: the core's confirmations, the store (read, to find which queues
            a settlement touched), the signals (to wake their readers), the
            wall clock.
    """

    def __init__(self, parts: PeeringParts) -> None:
        self._parts = parts
        #: FinalAcks that settled a copy since the start.
        self.settled = 0

    def arrived(
        self, connection: PeerConnection, ack: wire.FinalAck, recoverable: int | None
    ) -> None:
        """A FinalAck about one of our messages arrived on ``connection``."""
        # A session we opened knows the destination's address; one it opened does not.
        endpoint = connection.peer if connection.role is Role.INITIATOR else ""
        parts = self._parts
        unit = parts.confirmations.settle(
            ack.acked_message_id, ack.message_class, wall=parts.wall(), endpoint=endpoint
        )
        if unit is None:
            # Settled already (a repeat, or its deadline came first). It still
            # counts only after what arrived before it is stored.
            connection.store((), lambda _: connection.acknowledge(recoverable))
            return
        # If the deadline settles the copy first, this does nothing.
        op = storage.Attempt(storage.Together(unit.ops), storage.Together(()))

        def persisted(results: list[storage.Result]) -> None:
            self.settled += 1
            connection.acknowledge(recoverable)
            # The copy may have gone to a system queue: let its readers look.
            parts.signals.notify(touched_queues(parts.store, unit.ops))

        connection.store((op,), persisted)
