"""The counting half of an MQQB session: which user packets were sent, received and acknowledged.

Theory of operation
-------------------
Packets carry no sequence numbers ([MS-MQQB] §3.1.1.3.1, reference §14.2):
both ends count the user packets of each direction, all of them (the session
sequence) and the recoverable ones (DM=1, transactional included) on their
own. The nth user packet sent is session number n; the kth recoverable one is
recoverable number k. The wire carries these counts modulo 2^16 in a
SessionHeader; the ledgers keep them whole (they start at 0 for every TCP
session and only grow) and :func:`unwrap` turns a received u16 back into a
whole count, which is unambiguous because a window never spans 2^16 packets.

:class:`SendLedger` is the sender's side. Every sent packet is *in flight*
until a SessionHeader's AckSequenceNumber covers it. Then an express packet
is done; a recoverable one waits (*unpersisted*) until a SessionHeader says
the peer stored it: its recoverable number r is below the header's base, or
bit ``r - base`` of the flags is set (a base of 0 says nothing). "Below the
base" is what makes a lost SessionAck harmless: the receiver below never
puts a base above a number it has not persisted, so the next ack covers what
the lost one said. Each packet's tag comes out of :meth:`SendLedger.apply`
exactly once.

:class:`ReceiveLedger` is the receiver's side. A recoverable packet is
*unpersisted* from its arrival until the layer above reports it durable, then
*pending* until a SessionAck marks it. Let P be the top of the stored prefix
(every number up to P is stored). A SessionAck's base is the lowest pending
number when nothing below it is unpersisted, else P itself; either way the
base is stored and so is everything below it, so bit 0 is always set and the
ack is true under every reading of the spec ("seq <= base", "seq < base or
marked", "marked"). The bitmap marks the pending numbers from the base up to
32 of them; the rest wait for the next ack. Using P when nothing new sits
below a gap, and when nothing is pending at all, means every SessionAck
restates what the receiver has stored (where the spec would send base 0): an
ack that never arrived is made good by the next one. A base whose low 16 bits
are 0 (which means "no base" on the wire) is moved one lower, onto a number
that is stored as well.

Neither ledger knows about time, states or bytes; :mod:`qmgr.protocol.session`
drives them.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Final

import wire

#: The counters' modulus on the wire: all session counts are u16 (§14.2).
U16: Final = 0x10000
#: Recoverable numbers one SessionHeader can mark (RecoverableMsgAckFlags is a u32).
BITMAP_BITS: Final = 32


def unwrap(value: int, reference: int) -> int:
    """The largest whole count ``<= reference`` whose low 16 bits are ``value``."""
    return reference - ((reference - value) % U16)


@dataclass(slots=True)
class _Sent:
    """One sent user packet: its session number, recoverable number (or None) and tag."""

    number: int
    recoverable: int | None
    tag: object


class SendLedger:
    """The sender's counts and the packets not yet acknowledged (§14.3, §14.5)."""

    __slots__ = ("_in_flight", "_unpersisted", "recoverable_sent", "sent")

    def __init__(self) -> None:
        #: MessageSentCount, whole.
        self.sent = 0
        #: RecoverableMessageSentCount, whole.
        self.recoverable_sent = 0
        self._in_flight: deque[_Sent] = deque()
        # recoverable number -> packet; insertion order is number order.
        self._unpersisted: dict[int, _Sent] = {}

    @property
    def in_flight(self) -> int:
        """Sent packets the peer has not acknowledged at session level (UnAckedMessageCount)."""
        return len(self._in_flight)

    @property
    def unpersisted(self) -> int:
        """Recoverable packets acknowledged at session level, not yet reported stored."""
        return len(self._unpersisted)

    @property
    def outstanding(self) -> bool:
        """Whether any sent packet still waits for an acknowledgement of either kind."""
        return bool(self._in_flight or self._unpersisted)

    def record(self, *, recoverable: bool, tag: object) -> None:
        """Count one sent user packet."""
        self.sent += 1
        number = None
        if recoverable:
            self.recoverable_sent += 1
            number = self.recoverable_sent
        self._in_flight.append(_Sent(self.sent, number, tag))

    def apply(self, header: wire.SessionHeader) -> list[object]:
        """Apply a received SessionHeader; return the tags it completes, in send order.

        An AckSequenceNumber that does not advance (a stale or impossible
        value) acknowledges nothing. Bits for numbers that are not waiting
        (already reported, or not yet acknowledged at session level) are ignored.
        """
        done: list[_Sent] = []
        acked = unwrap(header.ack_sequence_number, self.sent)
        in_flight = self._in_flight
        unpersisted = self._unpersisted
        while in_flight and in_flight[0].number <= acked:
            packet = in_flight.popleft()
            if packet.recoverable is None:
                done.append(packet)
            else:
                unpersisted[packet.recoverable] = packet
        base = header.recoverable_ack_sequence_number
        # 0 means "no base" only with an empty bitmap: at the u16 wrap a peer's
        # lowest persisted number (65536, 131072, ...) is 0 on the wire.
        if (base or header.recoverable_ack_flags) and unpersisted:
            base = unwrap(base, self.recoverable_sent)
            # Everything below the base is stored (the receiver's rule, see the module).
            while unpersisted:
                lowest = next(iter(unpersisted))
                if lowest >= base:
                    break
                done.append(unpersisted.pop(lowest))
            flags = header.recoverable_ack_flags
            offset = 0
            while flags:
                if flags & 1:
                    packet_or_none = unpersisted.pop(base + offset, None)
                    if packet_or_none is not None:
                        done.append(packet_or_none)
                flags >>= 1
                offset += 1
        if len(done) > 1:
            done.sort(key=lambda packet: packet.number)
        return [packet.tag for packet in done]


class ReceiveLedger:
    """The receiver's counts and what the next SessionAck reports (§14.4)."""

    __slots__ = (
        "_pending",
        "_unpersisted",
        "received",
        "recoverable_received",
        "reported",
    )

    def __init__(self) -> None:
        #: MessageReceivedCount, whole.
        self.received = 0
        #: RecoverableMessageReceivedCount, whole (counted on arrival).
        self.recoverable_received = 0
        #: ``received`` when the last SessionAck was built.
        self.reported = 0
        # Recoverable numbers arrived and not yet persisted; insertion order is
        # number order, so the first key is the lowest.
        self._unpersisted: dict[int, None] = {}
        # Persisted recoverable numbers no SessionAck has reported yet.
        self._pending: set[int] = set()

    @property
    def unreported(self) -> int:
        """User packets received since the last SessionAck (UnackedReceivedMsgCount)."""
        return self.received - self.reported

    @property
    def awaiting_persist(self) -> int:
        """Recoverable packets arrived whose storage is not yet reported."""
        return len(self._unpersisted)

    def count(self, *, recoverable: bool) -> int | None:
        """Count one received user packet; return its recoverable number, if recoverable."""
        self.received += 1
        if not recoverable:
            return None
        self.recoverable_received += 1
        number = self.recoverable_received
        self._unpersisted[number] = None
        return number

    def persisted(self, number: int) -> bool:
        """Mark a recoverable number stored. Returns False if it was not awaiting that."""
        if number not in self._unpersisted:
            return False
        del self._unpersisted[number]
        self._pending.add(number)
        return True

    @property
    def pending(self) -> int:
        """Persisted numbers no SessionAck has reported yet (reportable or not)."""
        return len(self._pending)

    @property
    def has_pending(self) -> bool:
        """Whether persisted numbers wait for a SessionAck (reportable or not)."""
        return bool(self._pending)

    def _first_unpersisted(self) -> int:
        unpersisted = self._unpersisted
        return next(iter(unpersisted)) if unpersisted else self.recoverable_received + 1

    def _window(self) -> tuple[int, list[int]]:
        """The base the next ack would use and the pending numbers it would mark."""
        first_unstored = self._first_unpersisted()
        pending = self._pending
        lowest = min(pending) if pending else first_unstored
        if lowest < first_unstored:
            base = lowest
        elif first_unstored > 1:
            base = first_unstored - 1  # P: restate the stored prefix
        else:
            return 0, []  # nothing stored from number 1 on: no base is true
        if base % U16 == 0:
            base -= 1  # 0 on the wire means "no base"; base - 1 is stored too
        limit = base + BITMAP_BITS
        return base, sorted(number for number in pending if number < limit)

    def reportable(self) -> int:
        """How many pending (stored, never marked) numbers the next SessionAck can mark."""
        return len(self._window()[1])

    def take_ack(self) -> tuple[int, int]:
        """Build the recoverable part of a SessionAck and reset what it reports.

        Returns:
            ``(base, flags)``, the base as a whole number; ``(0, 0)`` when no
            recoverable packet can be reported. ``received`` and the marked
            numbers count as reported from here on.
        """
        self.reported = self.received
        base, numbers = self._window()
        if not base:
            return 0, 0
        flags = 1  # the base itself is stored (see _window)
        for number in numbers:
            flags |= 1 << (number - base)
        self._pending.difference_update(numbers)
        return base, flags
