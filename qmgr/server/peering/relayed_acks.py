"""FinalAcks of other queue managers that a router passes on or keeps.

Theory of operation
-------------------
A destination forgets a FinalAck once the queue manager it sent it to
acknowledges it (a SessionAck that counts it), and nothing sends it again.
So a router that takes one on its way back to the message's source
acknowledges it only when something durable holds it:

* **Passed on** (``qmgr.protocol.PassOn``, a session or a return path to the
  source is open): it goes out on that path tagged (:class:`PassedOnTag`),
  and the destination's packet is acknowledged only when the next hop's
  SessionAck counts it: the source (or the next router) has stored what it
  did with it. If that connection ends first, the FinalAck is kept as below,
  and acknowledged once stored. (Before, the router acknowledged it at once:
  a connection cut inside the packet, or a crash of the router, lost it, and
  the source reported the message NACK_RECEIVE_TIMEOUT at its deadline.)
  While it waits, the destination's session keeps the packet unacknowledged
  (its window allows for it; it is never longer than the next hop takes to
  answer or to be found gone).
* **Kept** (``qmgr.protocol.FinalAckToKeep``, no way to its source now): it
  is stored (``storage.RecordFinalAck`` under a 40-byte key naming its
  sender) and acknowledged once stored; the FinalAck courier
  (``qmgr.server.workers.final_ack_courier``) sends it when the source has a
  session here again. At most :data:`MAX_KEPT_FINAL_ACKS` wait in the store,
  counting those on their way to it; past that one is dropped with
  ``final_ack_not_kept``.

A connection that ends with FinalAcks still on their way to its store
leaves them uncounted: their writes are not acknowledged to anyone, and the
destination sends them again.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Final

import storage
import wire
from qmgr.core.final_acks import passed_on_final_ack_op

from .connection import PeerConnection

__all__ = ["MAX_KEPT_FINAL_ACKS", "PassedOnTag", "RelayedFinalAcks"]

#: The most FinalAcks a router keeps waiting (its own included).
MAX_KEPT_FINAL_ACKS: Final = 1_000_000


@dataclasses.dataclass(eq=False, slots=True)
class PassedOnTag:
    """The session tag of a FinalAck passed on: where it came from."""

    #: The FinalAck, to keep if the next hop never has it.
    ack: wire.FinalAck
    #: The connection it arrived on, and its number there (for the SessionAck).
    came_on: PeerConnection
    recoverable: int | None


class RelayedFinalAcks:
    """Passes on and keeps other queue managers' FinalAcks (see the module docstring).

    Args:
        store: its count of FinalAcks waiting.
        refused: called with the connection, the FinalAck and why, when one is
            not kept for want of room.
    """

    def __init__(
        self,
        store: storage.Store,
        refused: Callable[[PeerConnection, wire.FinalAck, str], None],
    ) -> None:
        self._store = store
        self._refused = refused
        #: FinalAcks on their way to the store, by the connection they came on.
        self._keeping: dict[PeerConnection, int] = {}
        #: FinalAcks passed on and not yet acknowledged, by the connection they
        #: went out on.
        self._passing: dict[PeerConnection, set[PassedOnTag]] = {}

    def pass_on(
        self,
        came_on: PeerConnection,
        ack: wire.FinalAck,
        data: bytes,
        path: PeerConnection,
        recoverable: int | None,
    ) -> None:
        """Send ``ack`` (built: ``data``) on ``path``; acknowledge it on ``came_on``
        once the peer of ``path`` has it."""
        tag = PassedOnTag(ack, came_on, recoverable)
        self._passing.setdefault(path, set()).add(tag)
        path.send_user_packet(data, recoverable=True, tag=tag)

    def acked(self, path: PeerConnection, tag: PassedOnTag) -> None:
        """The peer of ``path`` has the FinalAck passed on with ``tag``."""
        waiting = self._passing.get(path)
        if waiting is not None:
            waiting.discard(tag)
            if not waiting:
                del self._passing[path]
        tag.came_on.acknowledge(tag.recoverable)

    def keep(self, came_on: PeerConnection, ack: wire.FinalAck, recoverable: int | None) -> None:
        """Store ``ack`` to send when its source is reachable, and acknowledge it
        on ``came_on`` once stored; or drop it when there is no room."""
        keeping = self._keeping
        room = MAX_KEPT_FINAL_ACKS - self._store.final_ack_count() - sum(keeping.values())
        if room <= 0:
            self._refused(came_on, ack, f"{MAX_KEPT_FINAL_ACKS} FinalAcks wait to be sent already")
            came_on.acknowledge(recoverable)
            return
        keeping[came_on] = keeping.get(came_on, 0) + 1

        def kept(_: list[storage.Result]) -> None:
            left = keeping.get(came_on, 0) - 1
            if left > 0:
                keeping[came_on] = left
            else:
                keeping.pop(came_on, None)
            came_on.acknowledge(recoverable)

        came_on.store((passed_on_final_ack_op(ack),), kept)

    def connection_ended(self, connection: PeerConnection) -> None:
        """What was passed on along ``connection`` and not acknowledged is kept
        (if the connection it came on is still there to acknowledge it: else
        its destination sends it again); what was on its way to the store from
        it no longer counts."""
        self._keeping.pop(connection, None)
        for tag in self._passing.pop(connection, set()):
            if not tag.came_on.closing:
                self.keep(tag.came_on, tag.ack, tag.recoverable)
