"""The FinalAck courier: sends the FinalAcks this queue manager owes its sources.

Theory of operation
-------------------
This queue manager is a destination. The units that decide a
transactional message's fate record its FinalAck in the store
(``storage.RecordFinalAck``, see ``qmgr.core.final_acks``). The
:class:`FinalAckCourier` looks at the store's count of waiting FinalAcks a
few times a second and, for each source queue manager that has a session
with us (an open session whose handshake named it, else the connection its
messages last came in on), sends the waiting ones as recoverable packets to
its ``order_queue$``, at most :data:`IN_FLIGHT` per connection at a time. A
FinalAck is forgotten (``storage.ForgetFinalAcks``) only when that session's
SessionAck says the source has stored what it did with it; a connection that
ends first leaves it in the store, and the next session sends it again (a
repeat is harmless: the source finds nothing left to settle).

A router's store holds, beside its own, the FinalAcks of other destinations
it passes on (``qmgr.server.peering.relayed_acks``; key: the source, the
ordinal, the stream's timestamp and the sender's GUID): the first time at
once, as they came (:meth:`FinalAckCourier.send_kept`), and, if that
connection ends before its peer has one, or there was no way to the source
when it came, the same way as the courier's own.

A FinalAck that arrives about one of our own messages (we are the source)
is the peering adapter's to settle (``qmgr.server.peering.final_acks``).

The courier is a :class:`~.worker.Worker` whose step sends what waits, a
few times a second or when woken (a session opened, a forget was written,
a connection ended); its forgets are a worker of their own, which takes
every acknowledged FinalAck waiting in one unit. It knows the peering
adapter only by what it is given, a store to read, a committer to forget
with, and ``paths``, which says which connection reaches each source queue
manager now (any object with ``send_user_packet`` and ``closing``: a
:class:`Carrier`); the hub builds it and runs it.
"""

from __future__ import annotations

import dataclasses
import itertools
import time
import uuid
from collections.abc import Callable, Mapping
from typing import Final, Protocol

import structlog
import trio

import storage
import wire
from qmgr.core.final_acks import decode_final_ack

from ..backlog import Backlog
from ..committer import Committer
from .worker import Worker

__all__ = ["IN_FLIGHT", "POLL_SECONDS", "Carrier", "FinalAckCourier", "FinalAckTag"]

#: FinalAcks sent and not yet acknowledged, per connection.
IN_FLIGHT: Final = 256
#: How often the store's count of waiting FinalAcks is looked at.
POLL_SECONDS: Final = 0.2
#: The pause after a forget that failed (the FinalAcks are sent again meanwhile).
RETRY_SECONDS: Final = 1.0
_U32_MAX: Final = 0xFFFFFFFF


@dataclasses.dataclass(frozen=True, slots=True)
class FinalAckTag:
    """The session tag of a FinalAck we sent: its key in the store."""

    key: bytes


class Carrier(Protocol):
    """A connection to a source queue manager, as the courier sees it."""

    @property
    def closing(self) -> bool:
        """True once the connection is ending."""
        ...

    def send_user_packet(self, data: bytes, *, recoverable: bool = ..., tag: object = ...) -> None:
        """Queue a built user packet; ``tag`` comes back once the peer has it."""
        ...


class FinalAckCourier(Worker):
    """Sends the FinalAcks in the store (see the module docstring).

    Args:
        store: holds the FinalAcks waiting (read only here) and this queue
            manager's GUID (their source).
        committer: writes their forgets.
        paths: the connection that reaches each source queue manager now, by
            its GUID bytes.
        log: for forgets that fail.
        message_ids: gives each FinalAck's message id (this queue manager's
            message-id ordinals; a count from 1 without).
    """

    def __init__(
        self,
        store: storage.Store,
        committer: Committer,
        paths: Callable[[], Mapping[bytes, Carrier]],
        log: structlog.typing.FilteringBoundLogger,
        message_ids: Callable[[], int] | None = None,
    ) -> None:
        super().__init__(committer=committer, signals=None, log=log)
        self._store = store
        self._paths = paths
        #: The FinalAck keys sent on each connection and not yet acknowledged.
        self._in_flight: dict[Carrier, set[bytes]] = {}
        self._forgets = _Forgets(committer=committer, log=log, then=self.wake)
        #: The message ids of the FinalAcks it sends (see ``Receiver``'s OrderAcks).
        self._ids = message_ids if message_ids is not None else itertools.count(1).__next__
        #: FinalAcks sent since the start.
        self.sent = 0

    # ------------------------------------------------------------------ sending

    async def run(self) -> None:
        """Send and forget FinalAcks until cancelled."""
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._forgets.run)
            await super().run()

    async def step(self) -> float:
        self.send_waiting()
        return POLL_SECONDS

    def send_waiting(self) -> None:
        """Send what waits for every source queue manager we have a session with."""
        store = self._store
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
                self._send(connection, flying, pending.key, self._packet(pending))
                room -= 1

    def send_kept(self, connection: Carrier, key: bytes, data: bytes) -> None:
        """Send the stored FinalAck ``key`` on ``connection`` now, as ``data`` (a
        router passing another destination's on, as it came): forgotten once the
        peer has it, like any sent here (unless one is in flight there already)."""
        flying = self._in_flight.setdefault(connection, set())
        if key not in flying:
            self._send(connection, flying, key, data)

    def _send(self, connection: Carrier, flying: set[bytes], key: bytes, data: bytes) -> None:
        """Send the stored FinalAck ``key`` (built: ``data``), in flight on
        ``connection`` until its peer has it."""
        connection.send_user_packet(data, recoverable=True, tag=FinalAckTag(key))
        flying.add(key)
        self.sent += 1

    def _packet(self, pending: storage.PendingFinalAck) -> bytes:
        key = pending.key
        source = uuid.UUID(bytes=key[:16])
        ordinal = int.from_bytes(key[16:20], "big")
        # Another destination's, kept here to be passed on, says who sent it.
        kept_for = storage.final_ack_sender(key)
        sender = self._store.qm_guid if kept_for is None else uuid.UUID(bytes=kept_for)
        message_class, sequence_ordinal, timestamp, number, previous = decode_final_ack(
            pending.value
        )
        ack = wire.FinalAck(
            source_qm=sender,
            destination=wire.ORDER_QUEUE,
            destination_qm=source,
            message_id=self._ids() & _U32_MAX,
            sent_time=int(time.time()),
            message_class=message_class,
            sequence_id=wire.TxSequenceId(ordinal=sequence_ordinal, timestamp=timestamp),
            sequence_number=number,
            previous_sequence_number=previous,
            acked_source_qm=source,
            acked_message_id=ordinal,
        )
        return wire.build_packet(ack.to_message())

    def acked(self, connection: Carrier | None, tag: FinalAckTag) -> None:
        """The source stored what it did with this FinalAck: forget it."""
        if connection is not None:
            self._in_flight.get(connection, set()).discard(tag.key)
        self._forgets.backlog.add(tag.key)

    def connection_ended(self, connection: Carrier) -> None:
        """What was in flight on ``connection`` goes out again on the next one."""
        if self._in_flight.pop(connection, None):
            self.wake()


class _Forgets(Worker):
    """Forgets the FinalAcks whose source has them, all that wait in one unit."""

    def __init__(
        self,
        *,
        committer: Committer,
        log: structlog.typing.FilteringBoundLogger,
        then: Callable[[], None],
    ) -> None:
        super().__init__(committer=committer, signals=None, log=log)
        self.backlog: Backlog[bytes] = Backlog()
        self._then = then

    async def step(self) -> float:
        keys = tuple(await self.backlog.take())
        written = await self.submit(storage.Unit((storage.ForgetFinalAcks(keys),)))
        if written.error is not None:
            # Sent again later; the source settles nothing twice.
            self.log.warning("final_ack_forget_failed", error=str(written.error))
            await trio.sleep(RETRY_SECONDS)
        self._then()
        return 0.0
