"""One MQQB session between two queue managers, as a sans-IO state machine.

Theory of operation
-------------------
A :class:`PeerSession` is one TCP connection's session layer ([MS-MQQB] §3.1,
reference §14). It is driven by four kinds of input, each with the caller's
``now`` (seconds, any monotonic origin):

* :meth:`~PeerSession.start`, once, when the TCP connection is up;
* :meth:`~PeerSession.receive`, with each packet ``wire.FrameDecoder`` returns;
* :meth:`~PeerSession.send` and :meth:`~PeerSession.persisted`, from the layer
  above: a user packet goes out, an arrived recoverable packet is now durable;
* :meth:`~PeerSession.timer`, once ``now`` reaches :meth:`~PeerSession.next_deadline`.

Each returns a list of actions for the adapter to carry out in order:
:class:`Send` bytes, announce the session :class:`Opened`, hand up a user packet
that :class:`Arrived`, report sent packets :class:`Acked`, or :class:`Close` the
connection. The machine never reads a clock, touches a socket or logs.

States. The initiator goes WAITING_ECR (EstablishConnection sent) ->
WAITING_CPR (ConnectionParameters sent) -> OPEN; the acceptor goes WAITING_EC
-> WAITING_CP (EstablishConnection answered) -> OPEN (§14.1). Which packet is
legal in which state is the table ``_TRANSITIONS`` at the bottom of this
module; any other packet closes the session with a reason naming both. Once
OPEN the session is symmetric: both sides send user packets and SessionAcks.
CLOSED is final: a closed session ignores packets, persists and timers, and
refuses to send. (An initiator reports WAITING_ECR from construction; it
must be started before it receives anything.)

Counting and acknowledgement live in :mod:`qmgr.protocol.session_ledger`; this
module decides *when*. A SessionAck goes out:

* when the ack-send timer fires: it starts at AckWaitTimeout/2 when a user
  packet arrives, and is pulled in to RecoverableAckSendTimeout once a
  persisted recoverable packet can be marked (never pushed out). It is armed
  from persisted() rather than on arrival because the bit can only be set
  then: armed on arrival it would mostly send an ack without the bit;
* at once from :meth:`~PeerSession.persisted` when 32 persisted numbers are
  waiting (the bitmap is full) or when the packets received since the last
  ack reach half of our window (a streaming peer must not stall on the timer);
* at once from :meth:`~PeerSession.receive` when an *express* packet brings the
  unacknowledged count to half the window and no recoverable packet is still
  waiting to be persisted (nothing would come from persisted() to send it).

A received SessionHeader, stand-alone or piggy-backed on a user packet, is
checked (the peer's sent counts must equal ours received, else close, §14.5),
then completes sent packets and updates the peer's window.

Timers (§14.6): session initialization (close unless OPEN in time), ack wait
(close when sent packets stay unacknowledged, recoverable ones until reported
stored included, and nothing has arrived for AckWaitTimeout), ack send (above)
and idle cleanup (close after ``idle_timeout`` without a user packet either
way).

Where this goes beyond the reference, for robustness: a SessionAck's base
restates the receiver's stored prefix instead of being 0 when nothing new is
stored (see the ledger module); a piggy-backed header is accepted whether or
not the peer counted the carrying packet in its sent counts; a WindowSize of 0
counts as 1; an AckSequenceNumber that does not advance acknowledges nothing
instead of closing; the acceptor keeps its own timeouts when the initiator
announces 0; the SE bit of EstablishConnection.OperatingSystem is echoed in
whichever of its two encodings the initiator used (``session_values``).

The peer's window is whatever its last ConnectionParameters or SessionHeader
announced, 1 included: Windows' pause and memory-pressure signal, after which
:meth:`~PeerSession.can_send` allows one packet at a time until a later
header announces more.

Not handled here: piggy-backing our SessionHeader on user packets we send (a
stand-alone SessionAck is always used), the RTT-based RecoverableAckSendTimeout
(the configured value is announced), announcing a window of 1 ourselves (our
window is the configured one), and pings (:mod:`qmgr.protocol.ping`).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any, Final, TypeAlias

import wire

from .session_ledger import BITMAP_BITS, U16, ReceiveLedger, SendLedger
from .session_values import (
    Acked,
    Action,
    Arrived,
    Close,
    Opened,
    Role,
    Send,
    SessionError,
    SessionSettings,
    SessionState,
    ack_timeout_within,
    answer_operating_system,
    recoverable_ack_timeout_within,
)

__all__ = ["PeerSession"]

#: EstablishConnection.TimeStamp is a u32 of milliseconds.
_TIMESTAMP_MASK: Final = 0xFFFFFFFF
#: The settings of a session that is given none.
_DEFAULT_SETTINGS: Final = SessionSettings()


def _milliseconds(seconds: float) -> int:
    return min(_TIMESTAMP_MASK, max(0, round(seconds * 1000)))


def _packet_name(packet: object) -> str:
    if isinstance(packet, wire.EstablishConnection | wire.ConnectionParameters):
        suffix = " (refused)" if packet.refused else ""
        return type(packet).__name__ + suffix
    return type(packet).__name__


class PeerSession:
    """The session layer of one TCP connection between two queue managers.

    Args:
        role: which end we are.
        local_qm: our queue manager's GUID.
        remote_qm: the peer we expect. An initiator sends it as ServerGuid (None:
            a direct format name, ServerGuid NULL) and checks the response
            against it; an acceptor given one refuses any other client.
        settings: what we announce and enforce.
        now: the current time; the session initialization timer starts here.
    """

    def __init__(
        self,
        role: Role,
        *,
        local_qm: uuid.UUID,
        remote_qm: uuid.UUID | None = None,
        settings: SessionSettings = _DEFAULT_SETTINGS,
        now: float,
    ) -> None:
        self.role = role
        self.local_qm = local_qm
        self.settings = settings
        self._expected_qm = remote_qm
        #: The peer's GUID: known once the handshake names it.
        self.remote_qm: uuid.UUID | None = None
        #: The peer's window (its last WindowSize; 1 at least).
        self.peer_window = 1
        #: Why the session closed, once CLOSED.
        self.close_reason: str | None = None
        #: When the peer stopped answering, if the session closed for that (its
        #: acknowledgement timeout: sent packets, and nothing received since).
        self.silent_since: float | None = None
        #: The session closed because it carried nothing for ``idle_timeout``
        #: (a normal end, not a failure).
        self.closed_idle = False
        #: Acceptor: a policy refuses every connection (``peers.max_connections``
        #: reached): the EstablishConnection is answered with CS set and this
        #: reason, then the session closes.
        self.refusing: str | None = None
        self._state = (
            SessionState.WAITING_ECR if role is Role.INITIATOR else SessionState.WAITING_EC
        )
        self._started = False
        self._ack_timeout = settings.ack_timeout
        self._recoverable_ack_timeout = recoverable_ack_timeout_within(
            settings.recoverable_ack_timeout
        )
        self._sending = SendLedger()
        self._receiving = ReceiveLedger()
        # Timers (absolute times; None when stopped).
        self._init_deadline: float | None = now + settings.init_timeout
        self._ack_send_at: float | None = None
        self._ack_wait_from = now  # last packet received, or first send with nothing outstanding
        self._last_user_packet = now

    # ------------------------------------------------------------------ properties

    @property
    def state(self) -> SessionState:
        """The current :class:`SessionState`."""
        return self._state

    @property
    def unacked(self) -> int:
        """Sent user packets not yet acknowledged at session level (what the window counts)."""
        return self._sending.in_flight

    @property
    def unpersisted(self) -> int:
        """Sent recoverable packets acknowledged at session level but not yet reported stored."""
        return self._sending.unpersisted

    @property
    def ack_timeout(self) -> float:
        """AckWaitTimeout in force: the initiator's, on both ends once negotiated
        (at the acceptor, held within 20..120 s, or this end's own setting if that
        is outside)."""
        return self._ack_timeout

    @property
    def recoverable_ack_timeout(self) -> float:
        """RecoverableAckSendTimeout in force (the initiator's, on both ends, once negotiated)."""
        return self._recoverable_ack_timeout

    def can_send(self) -> bool:
        """Whether :meth:`send` may be called: OPEN and the peer's window not full."""
        return self._state is SessionState.OPEN and self._sending.in_flight < self.peer_window

    # ------------------------------------------------------------------ inputs

    def start(self, now: float) -> list[Action]:
        """Begin the handshake once the TCP connection is up.

        Returns:
            For an initiator, the EstablishConnection to send; for an acceptor, nothing.

        Raises:
            SessionError: called twice.
        """
        if self._started:
            msg = "start() was already called"
            raise SessionError(msg)
        self._started = True
        if self.role is Role.ACCEPTOR or self._state is SessionState.CLOSED:
            return []
        request = wire.EstablishConnection(
            client_qm=self.local_qm,
            server_qm=self._expected_qm or wire.NULL_GUID,
            timestamp=int(now * 1000) & _TIMESTAMP_MASK,
        )
        return [Send(data=wire.build_packet(request))]

    def receive(self, packet: wire.Packet, now: float) -> list[Action]:
        """Handle one packet from the peer.

        Returns:
            The actions to carry out, in order. A packet that is illegal in the
            current state, or a peer that breaks the protocol, gives a
            :class:`Close` (and the session is CLOSED).

        Raises:
            SessionError: an initiator that was not started.
        """
        if self._state is SessionState.CLOSED:
            return []
        if not self._started and self.role is Role.INITIATOR:
            msg = "receive() before start(): the initiator speaks first"
            raise SessionError(msg)
        self._ack_wait_from = now
        handler = _TRANSITIONS.get((self._state, type(packet)))
        if handler is None:
            return self._close(f"unexpected {_packet_name(packet)} in state {self._state.name}")
        return handler(self, packet, now)

    def send(self, data: bytes, *, recoverable: bool, tag: object, now: float) -> bytes:
        """Count a user packet about to be written.

        Args:
            data: one built user packet (``wire.build_packet`` of a UserMessage,
                OrderAck or FinalAck) without a SessionHeader.
            recoverable: whether it is recoverable (DM=1; transactional packets
                and FinalAcks are); must match the packet.
            tag: reported in :class:`Acked` once the peer acknowledged it.
            now: the current time.

        Returns:
            The bytes to write: ``data`` itself.

        Raises:
            SessionError: :meth:`can_send` is False, or ``data`` is not a user
                packet without a SessionHeader.
        """
        if not self.can_send():
            msg = (
                f"cannot send in state {self._state.name}"
                if self._state is not SessionState.OPEN
                else f"the peer's window is full ({self._sending.in_flight}/{self.peer_window})"
            )
            raise SessionError(msg)
        if len(data) < 16:
            msg = f"not a packet: {len(data)} bytes"
            raise SessionError(msg)
        flags = int.from_bytes(data[2:4], "little")
        if flags & (wire.BaseFlags.INTERNAL | wire.BaseFlags.SESSION):
            msg = "send() takes a user packet without a SessionHeader"
            raise SessionError(msg)
        if not self._sending.outstanding:
            self._ack_wait_from = now
        self._sending.record(recoverable=recoverable, tag=tag)
        self._last_user_packet = now
        return data

    def transmitting(self, now: float) -> None:
        """Bytes of the packets sent are still reaching the peer (its TCP took more
        since the last look, say): the wait for its acknowledgement starts again
        at ``now``. A peer cannot acknowledge a packet before it has all of it,
        and on a slow link a large one takes longer than ``ack_timeout``."""
        if self._sending.outstanding:
            self._ack_wait_from = now

    def persisted(self, recoverable_number: int, now: float) -> list[Action]:
        """An arrived recoverable packet is durable: it may be reported in a SessionAck.

        Returns:
            Possibly a :class:`Send` of a SessionAck (bitmap full, or half our
            window received since the last ack); else the ack-send timer is armed.

        Raises:
            SessionError: the number is not one that arrived and awaits persistence.
        """
        if self._state is SessionState.CLOSED:
            return []
        receiving = self._receiving
        if not receiving.persisted(recoverable_number):
            msg = f"recoverable packet {recoverable_number} is not awaiting persistence"
            raise SessionError(msg)
        # ``reportable()`` sorts the pending numbers: ask it only when it can
        # reach the bitmap's size (it is at most the number pending).
        pending = receiving.pending
        if receiving.unreported >= self._half_window() or (
            pending >= BITMAP_BITS and receiving.reportable() >= BITMAP_BITS
        ):
            return self._session_acks(now)
        due = now + self._recoverable_ack_timeout
        if self._ack_send_at is not None and self._ack_send_at <= due:
            return []  # already armed at least this early
        if pending and receiving.reportable():
            # The first stored packet since the last ack pulls the timer in; later
            # ones never push it out.
            self._arm_ack_send(now + self._recoverable_ack_timeout)
        return []

    def timer(self, now: float) -> list[Action]:
        """Run the timers that are due at ``now``; call it once ``now >= next_deadline()``."""
        state = self._state
        if state is SessionState.CLOSED:
            return []
        if self._init_deadline is not None and now >= self._init_deadline:
            return self._close(
                f"the handshake did not finish in {self.settings.init_timeout:g} s "
                f"(state {state.name})"
            )
        if state is not SessionState.OPEN:
            return []
        if self._sending.outstanding and now >= self._ack_wait_from + self._ack_timeout:
            self.silent_since = self._ack_wait_from
            return self._close(
                f"no acknowledgement for {self._sending.in_flight + self._sending.unpersisted} "
                f"sent packets and nothing received for {self._ack_timeout:g} s"
            )
        if now >= self._last_user_packet + self.settings.idle_timeout:
            self.closed_idle = True
            return self._close(f"idle: no user packet for {self.settings.idle_timeout:g} s")
        if self._ack_send_at is not None and now >= self._ack_send_at:
            self._ack_send_at = None
            receiving = self._receiving
            if receiving.unreported or receiving.reportable():
                return self._session_acks(now)
        return []

    def next_deadline(self) -> float | None:
        """When :meth:`timer` must next be called, or None while no timer runs."""
        state = self._state
        if state is SessionState.CLOSED:
            return None
        if state is not SessionState.OPEN:
            return self._init_deadline
        deadlines = [self._last_user_packet + self.settings.idle_timeout]
        if self._sending.outstanding:
            deadlines.append(self._ack_wait_from + self._ack_timeout)
        if self._ack_send_at is not None:
            deadlines.append(self._ack_send_at)
        return min(deadlines)

    def close(self, reason: str) -> list[Action]:
        """Close from our side. Returns ``[Close(reason)]``, or nothing if already CLOSED."""
        if self._state is SessionState.CLOSED:
            return []
        return self._close(reason)

    def connection_lost(self) -> None:
        """The TCP connection is gone: the session is CLOSED, with no action to take."""
        if self._state is not SessionState.CLOSED:
            self._close("connection lost")

    # ------------------------------------------------------------------ handshake

    def _on_establish_request(self, packet: wire.EstablishConnection, now: float) -> list[Action]:
        # Acceptor, WAITING_EC: answer with our GUID; refuse (CS set, then close) a
        # request for another QM, or any request while a policy refuses them all.
        refusal = self._establish_refusal(packet)
        response = wire.EstablishConnection(
            internal=wire.InternalHeader(
                flags=wire.InternalFlags.CONNECTION_REFUSED if refusal else 0
            ),
            client_qm=packet.client_qm,
            server_qm=self.local_qm,
            timestamp=packet.timestamp,
            operating_system=answer_operating_system(packet.operating_system),
        )
        send = Send(data=wire.build_packet(response))
        if refusal is not None:
            return [send, *self._close(f"refused: {refusal}")]
        self.remote_qm = packet.client_qm
        self._state = SessionState.WAITING_CP
        return [send]

    def _establish_refusal(self, packet: wire.EstablishConnection) -> str | None:
        """Why the EstablishConnection ``packet`` is refused (CS), or None."""
        if self.refusing is not None:
            return self.refusing
        if packet.server_qm not in (wire.NULL_GUID, self.local_qm):
            return f"the peer asked for queue manager {packet.server_qm}, we are {self.local_qm}"
        if self._expected_qm is not None and packet.client_qm != self._expected_qm:
            return f"expected queue manager {self._expected_qm}, got {packet.client_qm}"
        return None

    def _on_establish_response(self, packet: wire.EstablishConnection, now: float) -> list[Action]:
        # Initiator, WAITING_ECR: check the echo, then send our parameters.
        if packet.refused:
            return self._close(f"the peer ({packet.server_qm}) refused the connection")
        if packet.client_qm != self.local_qm:
            return self._close(
                f"EstablishConnection response echoes ClientGuid {packet.client_qm}, "
                f"we are {self.local_qm}"
            )
        expected = self._expected_qm
        if expected is not None and packet.server_qm != expected:
            return self._close(f"expected queue manager {expected}, reached {packet.server_qm}")
        if packet.server_qm == wire.NULL_GUID:
            return self._close("EstablishConnection response without a ServerGuid")
        self.remote_qm = packet.server_qm
        parameters = wire.ConnectionParameters(
            recoverable_ack_timeout=_milliseconds(self._recoverable_ack_timeout),
            ack_timeout=_milliseconds(self._ack_timeout),
            window_size=self.settings.window_size,
        )
        self._state = SessionState.WAITING_CPR
        return [Send(data=wire.build_packet(parameters))]

    def _on_parameters_request(self, packet: wire.ConnectionParameters, now: float) -> list[Action]:
        # Acceptor, WAITING_CP: adopt the initiator's timeouts and window, answer with ours.
        if packet.refused:
            return self._close("the peer refused the connection (ConnectionParameters)")
        if packet.ack_timeout > 0:
            self._ack_timeout = ack_timeout_within(
                packet.ack_timeout / 1000, self.settings.ack_timeout
            )
        if packet.recoverable_ack_timeout > 0:
            self._recoverable_ack_timeout = recoverable_ack_timeout_within(
                packet.recoverable_ack_timeout / 1000
            )
        response = wire.ConnectionParameters(
            recoverable_ack_timeout=packet.recoverable_ack_timeout,
            ack_timeout=packet.ack_timeout,
            window_size=self.settings.window_size,
        )
        return [Send(data=wire.build_packet(response)), self._open(packet.window_size, now)]

    def _on_parameters_response(
        self, packet: wire.ConnectionParameters, now: float
    ) -> list[Action]:
        # Initiator, WAITING_CPR: the acceptor's window; the session is open.
        if packet.refused:
            return self._close("the peer refused the connection (ConnectionParameters)")
        return [self._open(packet.window_size, now)]

    def _open(self, peer_window: int, now: float) -> Opened:
        assert self.remote_qm is not None
        self._state = SessionState.OPEN
        self._init_deadline = None
        self.peer_window = max(1, peer_window)
        self._last_user_packet = now
        return Opened(remote_qm=self.remote_qm, peer_window=self.peer_window)

    # ------------------------------------------------------------------ open session

    def _on_session_ack(self, packet: wire.SessionAck, now: float) -> list[Action]:
        return self._session_header(packet.session, piggy_backed=False)

    def _on_user_message(self, packet: wire.UserMessage, now: float) -> list[Action]:
        actions: list[Action] = []
        recoverable = packet.is_recoverable
        if packet.session is not None:
            actions = self._session_header(packet.session, piggy_backed=True, carrier=recoverable)
            if self._state is SessionState.CLOSED:
                return actions
        receiving = self._receiving
        number = receiving.count(recoverable=recoverable)
        self._last_user_packet = now
        actions.append(Arrived(packet=packet, recoverable_number=number))
        if (
            not recoverable
            and not receiving.awaiting_persist
            and receiving.unreported >= self._half_window()
        ):
            actions.extend(self._session_acks(now))
        else:
            self._arm_ack_send(now + self._ack_timeout / 2, only_if_stopped=True)
        return actions

    def _session_header(
        self, header: wire.SessionHeader, *, piggy_backed: bool, carrier: bool = False
    ) -> list[Action]:
        receiving = self._receiving
        counts = (header.user_message_sequence_number, header.recoverable_message_sequence_number)
        expected = (receiving.received % U16, receiving.recoverable_received % U16)
        # A piggy-backed header may or may not count the packet that carries it.
        also = ((receiving.received + 1) % U16, (receiving.recoverable_received + carrier) % U16)
        if counts != expected and not (piggy_backed and counts == also):
            return self._close(
                f"SessionHeader counts {counts[0]} sent / {counts[1]} recoverable sent, "
                f"but we received {expected[0]} / {expected[1]}"
            )
        self.peer_window = max(1, header.window_size)
        tags = self._sending.apply(header)
        return [Acked(tags=tuple(tags))] if tags else []

    def _session_acks(self, now: float) -> list[Action]:
        """A SessionAck, and as many more as the stored packets waiting to be marked
        need (32 a bitmap): a backlog is acknowledged at once, not one bitmap per
        ``recoverable_ack_timeout`` while the sender's window stays full."""
        acks: list[Action] = [self._session_ack(now)]
        while self._receiving.reportable():
            acks.append(self._session_ack(now))
        return acks

    def _session_ack(self, now: float) -> Send:
        receiving = self._receiving
        sending = self._sending
        base, flags = receiving.take_ack()
        header = wire.SessionHeader(
            ack_sequence_number=receiving.received % U16,
            recoverable_ack_sequence_number=base % U16,
            recoverable_ack_flags=flags,
            user_message_sequence_number=sending.sent % U16,
            recoverable_message_sequence_number=sending.recoverable_sent % U16,
            window_size=self.settings.window_size,
        )
        # Re-arm only for what this ack could not carry (bitmap overflow).
        self._ack_send_at = now + self._recoverable_ack_timeout if receiving.reportable() else None
        return Send(data=wire.build_packet(wire.SessionAck(session=header)))

    # ------------------------------------------------------------------ helpers

    def _half_window(self) -> int:
        # A sender stops at its own WindowSize ([MS-MQQB] 3.1.7.1: 64 on Windows),
        # which its ConnectionParameters announced: acknowledge before it fills.
        return max(1, min(self.settings.window_size, self.peer_window) // 2)

    def _arm_ack_send(self, at: float, *, only_if_stopped: bool = False) -> None:
        current = self._ack_send_at
        if current is None:
            self._ack_send_at = at
        elif not only_if_stopped:
            self._ack_send_at = min(current, at)

    def _close(self, reason: str) -> list[Action]:
        self._state = SessionState.CLOSED
        self.close_reason = reason
        self._ack_send_at = None
        self._init_deadline = None
        return [Close(reason=reason)]

    def _skip_counters(
        self,
        *,
        sent: int = 0,
        recoverable_sent: int = 0,
        received: int = 0,
        recoverable_received: int = 0,
    ) -> None:
        """Test hook: advance the counters as if that many packets had come and gone.

        Only while nothing is outstanding either way; both ends of a test must
        skip matching amounts (our ``sent`` is the peer's ``received``).
        """
        sending = self._sending
        receiving = self._receiving
        if sending.outstanding or receiving.awaiting_persist or receiving.has_pending:
            msg = "_skip_counters() needs a quiet session"
            raise SessionError(msg)
        if recoverable_sent > sent or recoverable_received > received:
            msg = "recoverable counts cannot exceed the totals"
            raise SessionError(msg)
        sending.sent += sent
        sending.recoverable_sent += recoverable_sent
        receiving.received += received
        receiving.recoverable_received += recoverable_received
        receiving.reported = receiving.received


_Handler: TypeAlias = Callable[[PeerSession, Any, float], list[Action]]

#: (state, packet type) -> handler. Anything missing closes the session.
_TRANSITIONS: Final[dict[tuple[SessionState, type], _Handler]] = {
    (SessionState.WAITING_EC, wire.EstablishConnection): PeerSession._on_establish_request,
    (SessionState.WAITING_ECR, wire.EstablishConnection): PeerSession._on_establish_response,
    (SessionState.WAITING_CP, wire.ConnectionParameters): PeerSession._on_parameters_request,
    (SessionState.WAITING_CPR, wire.ConnectionParameters): PeerSession._on_parameters_response,
    (SessionState.OPEN, wire.SessionAck): PeerSession._on_session_ack,
    (SessionState.OPEN, wire.UserMessage): PeerSession._on_user_message,
}
