"""FinalAcks between queue managers: sent from the store, settled when they arrive.

Theory of operation
-------------------
**Sending** (this queue manager is a destination). The units that decide a
transactional message's fate record its FinalAck in the store
(``storage.RecordFinalAck``, see ``qmgr.core.final_acks``). The
:class:`FinalAckCourier` looks at the store's count of waiting FinalAcks a
few times a second and, for each source queue manager that has a session
with us (the connection its messages last came in on, or any open session
whose handshake named it), sends the waiting ones as recoverable packets to
its ``order_queue$``, at most :data:`IN_FLIGHT` per connection at a time. A
FinalAck is forgotten (``storage.ForgetFinalAcks``) only when that session's
SessionAck says the source has stored what it did with it; a connection that
ends first leaves it in the store, and the next session sends it again (a
repeat is harmless: the source finds nothing left to settle).

**Receiving** (this queue manager is the source). A FinalAck about one of
our messages settles its copy awaiting confirmation
(``qmgr.core.confirmation.Confirmations.settle``) in the connection's next
write; the FinalAck counts in our SessionAck only once that write is synced.
A FinalAck about another queue manager's message (we relayed it) is passed
on along the connection that queue manager's messages arrived on, as
OrderAcks are; a router keeps no FinalAck of its own.
"""

from __future__ import annotations

import dataclasses
import itertools
import time
import uuid
from typing import TYPE_CHECKING, Final

import structlog
import trio

import storage
import wire
from qmgr.core.confirmation import Confirmations
from qmgr.core.final_acks import decode_final_ack
from qmgr.core.outcomes import touched_queues
from qmgr.protocol import Role

if TYPE_CHECKING:
    from .peer_connection import PeerConnection
    from .peering import Peering

__all__ = ["IN_FLIGHT", "POLL_SECONDS", "FinalAckCourier", "FinalAckTag"]

#: FinalAcks sent and not yet acknowledged, per connection.
IN_FLIGHT: Final = 256
#: How often the store's count of waiting FinalAcks is looked at.
POLL_SECONDS: Final = 0.2
_U32_MAX: Final = 0xFFFFFFFF


@dataclasses.dataclass(frozen=True, slots=True)
class FinalAckTag:
    """The session tag of a FinalAck we sent: its key in the store."""

    key: bytes


class FinalAckCourier:
    """Sends the FinalAcks in the store and settles the ones that arrive."""

    def __init__(
        self,
        peering: Peering,
        confirmations: Confirmations,
        log: structlog.typing.FilteringBoundLogger,
    ) -> None:
        self._peering = peering
        self._confirmations = confirmations
        self._log = log
        self._in_flight: dict[PeerConnection, set[bytes]] = {}
        self._to_forget: list[bytes] = []
        self._wake = trio.Event()
        self._forget_wake = trio.Event()
        self._ids = itertools.count(1)
        #: FinalAcks sent, and settled on arrival, since the start.
        self.sent = 0
        self.settled = 0

    # ------------------------------------------------------------------ sending

    def wake(self) -> None:
        """There may be FinalAcks to send now (a session opened, one was acknowledged)."""
        self._wake.set()

    async def run(self) -> None:
        """Send and forget FinalAcks until cancelled."""
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._forgetter)
            while True:
                with trio.move_on_after(POLL_SECONDS):
                    await self._wake.wait()
                self._wake = trio.Event()
                self.send_waiting()

    def send_waiting(self) -> None:
        """Send what waits for every source queue manager we have a session with."""
        store = self._peering.store
        if not store.final_ack_count():
            return
        for source, connection in self._paths().items():
            flying = self._in_flight.setdefault(connection, set())
            room = IN_FLIGHT - len(flying)
            if room <= 0:
                continue
            for pending in store.final_acks(source_qm=source, limit=IN_FLIGHT):
                if room <= 0:
                    break
                if pending.key in flying:
                    continue
                connection.send_user_packet(
                    self._packet(pending), recoverable=True, tag=FinalAckTag(pending.key)
                )
                flying.add(pending.key)
                room -= 1
                self.sent += 1

    def _paths(self) -> dict[bytes, PeerConnection]:
        peering = self._peering
        paths = {
            connection.remote_qm.bytes: connection
            for connection in peering.connections
            if connection.opened.is_set()
            and not connection.closing
            and isinstance(connection.remote_qm, uuid.UUID)
        }
        paths.update(
            (source, connection)
            for source, connection in peering.return_paths.items()
            if not connection.closing
        )
        return paths

    def _packet(self, pending: storage.PendingFinalAck) -> bytes:
        source = uuid.UUID(bytes=pending.key[:16])
        ordinal = int.from_bytes(pending.key[16:], "big")
        message_class, sequence_ordinal, timestamp, number, previous = decode_final_ack(
            pending.value
        )
        ack = wire.FinalAck(
            source_qm=self._peering.local_qm,
            destination=wire.ORDER_QUEUE,
            destination_qm=source,
            message_id=next(self._ids) & _U32_MAX,
            sent_time=int(time.time()),
            message_class=message_class,
            sequence_id=wire.TxSequenceId(ordinal=sequence_ordinal, timestamp=timestamp),
            sequence_number=number,
            previous_sequence_number=previous,
            acked_source_qm=source,
            acked_message_id=ordinal,
        )
        return wire.build_packet(ack.to_message())

    def acked(self, connection: PeerConnection | None, tag: FinalAckTag) -> None:
        """The source stored what it did with this FinalAck: forget it."""
        if connection is not None:
            self._in_flight.get(connection, set()).discard(tag.key)
        self._to_forget.append(tag.key)
        self._forget_wake.set()

    def connection_ended(self, connection: PeerConnection) -> None:
        """What was in flight on ``connection`` goes out again on the next one."""
        if self._in_flight.pop(connection, None):
            self._wake.set()

    async def _forgetter(self) -> None:
        while True:
            if not self._to_forget:
                self._forget_wake = trio.Event()
                await self._forget_wake.wait()
                continue
            keys, self._to_forget = tuple(self._to_forget), []
            unit = storage.Unit((storage.ForgetFinalAcks(keys),))
            try:
                outcome = await self._peering.committer.submit(unit)
            except storage.StoreError as exc:
                outcome = storage.UnitOutcome.failed(unit, exc)
            if outcome.error is not None:
                # Sent again later; the source settles nothing twice.
                self._log.warning("final_ack_forget_failed", error=str(outcome.error))
                await trio.sleep(1.0)
            self._wake.set()

    # ------------------------------------------------------------------ receiving

    def arrived(
        self, connection: PeerConnection, packet: wire.UserMessage, recoverable: int | None
    ) -> None:
        """A FinalAck arrived on ``connection``."""
        peering = self._peering
        ack = wire.FinalAck.from_message(packet)
        if ack.acked_source_qm != peering.local_qm:
            path = peering.return_paths.get(ack.acked_source_qm.bytes)
            if path is not None:
                path.send_user_packet(
                    wire.build_packet(dataclasses.replace(packet, session=None)), recoverable=True
                )
            self._processed(connection, recoverable)
            return
        # A session we opened knows the destination's address; one it opened does not.
        endpoint = connection.peer if connection.role is Role.INITIATOR else ""
        unit = self._confirmations.settle(
            ack.acked_message_id, ack.message_class, wall=time.time(), endpoint=endpoint
        )
        if unit is None:
            # Settled already (a repeat, or its deadline came first). It still
            # counts only after what arrived before it is stored.
            connection.accept((), lambda _: self._processed(connection, recoverable))
            return
        # If the deadline settles the copy first, this does nothing.
        op = storage.Attempt(storage.Together(unit.ops), storage.Together(()))

        def stored(results: list[storage.Result]) -> None:
            self.settled += 1
            self._processed(connection, recoverable)
            # The copy may have gone to a system queue: let its readers look.
            peering.signals.notify(touched_queues(peering.store, unit.ops))

        connection.accept((op,), stored)

    @staticmethod
    def _processed(connection: PeerConnection, recoverable: int | None) -> None:
        if recoverable is not None:
            connection.persisted(recoverable)
