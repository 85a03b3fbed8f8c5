"""FinalAcks of other queue managers that a router passes on or keeps.

Theory of operation
-------------------
A destination forgets a FinalAck once the queue manager it sent it to
acknowledges it (a SessionAck that counts it), and nothing sends it again.
So a router that takes one on its way back to the message's source
acknowledges it only once its own store holds it, and forgets it only when
the next hop has it:

* **Passed on** (``qmgr.protocol.PassOn``: a session or a return path to the
  source is open): it is stored (``storage.RecordFinalAck`` under a 40-byte
  key naming its sender), acknowledged to the destination once stored, and
  then sent on that path as it came, through the FinalAck courier
  (``qmgr.server.workers.final_ack_courier``: ``send_kept``), which forgets
  it when the next hop's SessionAck counts it. If that connection ends
  first, the courier sends it again on the source's next session. A cut
  inside the packet, a crash of the router, or a destination that sends the
  same bytes again loses nothing; and the destination's session is never
  kept waiting for the source (a source that acknowledges slowly would make
  the destination's session time out and send the FinalAck again, for
  ever). The price is one write per FinalAck passed on, and one forget.
* **Kept** (``qmgr.protocol.FinalAckToKeep``: no way to its source now): it
  is stored the same way and acknowledged once stored; the courier sends it
  when the source has a session here again.

At most :data:`MAX_KEPT_FINAL_ACKS` wait in the store, counting those on
their way to it. Past that, one to keep is dropped (``final_ack_not_kept``),
and one to pass on goes on at once, acknowledged as it is sent, as it did
before routers stored them.
"""

from __future__ import annotations

from collections.abc import Callable

import storage
import wire
from qmgr.core.final_acks import MAX_KEPT_FINAL_ACKS, passed_on_final_ack_op

from .connection import PeerConnection

__all__ = ["RelayedFinalAcks"]

#: Sends a stored FinalAck (its key, its packet) on a connection, to be forgotten
#: once the peer has it.
SendKept = Callable[[PeerConnection, bytes, bytes], None]


class RelayedFinalAcks:
    """Passes on and keeps other queue managers' FinalAcks (see the module docstring).

    Args:
        store: its count of FinalAcks waiting.
        send_kept: the courier's ``send_kept``.
        refused: called with the connection, the FinalAck and why, when one is
            not kept for want of room.
    """

    def __init__(
        self,
        store: storage.Store,
        send_kept: SendKept,
        refused: Callable[[PeerConnection, wire.FinalAck, str], None],
    ) -> None:
        self._store = store
        self._send_kept = send_kept
        self._refused = refused
        #: FinalAcks on their way to the store, by the connection they came on.
        self._keeping: dict[PeerConnection, int] = {}

    def _room(self) -> bool:
        waiting = self._store.final_ack_count() + sum(self._keeping.values())
        return waiting < MAX_KEPT_FINAL_ACKS

    def pass_on(
        self,
        came_on: PeerConnection,
        ack: wire.FinalAck,
        data: bytes,
        path: PeerConnection,
        recoverable: int | None,
    ) -> None:
        """Store ``ack``, acknowledge it on ``came_on``, then send it (built:
        ``data``) on ``path``."""
        if not self._room():
            path.send_user_packet(data, recoverable=True)
            came_on.acknowledge(recoverable)
            return
        op = passed_on_final_ack_op(ack)

        def stored() -> None:
            if not path.closing:
                self._send_kept(path, op.key, data)

        self._store_then(came_on, op, recoverable, stored)

    def keep(self, came_on: PeerConnection, ack: wire.FinalAck, recoverable: int | None) -> None:
        """Store ``ack`` to send when its source is reachable, and acknowledge it
        on ``came_on`` once stored; or drop it when there is no room."""
        if not self._room():
            reason = f"{MAX_KEPT_FINAL_ACKS} FinalAcks wait to be sent already"
            self._refused(came_on, ack, reason)
            came_on.acknowledge(recoverable)
            return
        self._store_then(came_on, passed_on_final_ack_op(ack), recoverable, lambda: None)

    def _store_then(
        self,
        came_on: PeerConnection,
        op: storage.RecordFinalAck,
        recoverable: int | None,
        then: Callable[[], None],
    ) -> None:
        keeping = self._keeping
        keeping[came_on] = keeping.get(came_on, 0) + 1

        def stored(_: list[storage.Result]) -> None:
            left = keeping.get(came_on, 0) - 1
            if left > 0:
                keeping[came_on] = left
            else:
                keeping.pop(came_on, None)
            came_on.acknowledge(recoverable)
            then()

        came_on.persister.store((op,), stored)

    def connection_ended(self, connection: PeerConnection) -> None:
        """What was on its way to the store from ``connection`` no longer counts
        (its write acknowledges nothing now: the destination sends it again)."""
        self._keeping.pop(connection, None)
