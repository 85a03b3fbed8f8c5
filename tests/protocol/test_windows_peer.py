"""What a Windows queue manager may send, accepted by the sans-IO layers.

Each case is a packet, written byte by byte from the spec's layouts
(:mod:`.spec_packets`), that Windows sends or that the reference records in
the wild, fed to qmgr's ends of the example session (:mod:`.spec_peers`):

* a SessionHeader piggy-backed on a user packet, a transactional message and
  an OrderAck, counting its carrier or not;
* headers qmgr does not use: a SecurityHeader with the user's SID, the
  MessagePropertiesHeader's ExtensionData, a SoapHeader, [MS-MQRR] trailers,
  SRMP envelope headers on a message that arrived over HTTP, a reserved
  BaseHeader bit from a Windows capture: each ignored, the message taken;
* a window dropped to 1 (pause, memory pressure) and grown again;
* EstablishConnection.OperatingSystem in the spec's encoding (the example's
  ``10 03``) and in zgrab2's (``80 10``), and zgrab2's whole request;
* GUIDs in the byte order Windows writes them ([MS-DTYP]: ``bytes_le``).

Time is the explicit ``now`` of every call; nothing opens a socket.
"""

from __future__ import annotations

import struct
import uuid

import pytest

import wire
from qmgr.protocol import (
    Accepted,
    Acked,
    Arrived,
    Close,
    EntryKind,
    OrderAckArrived,
    PeerSession,
    Role,
    SessionError,
    SessionState,
)

from . import spec_packets as sp
from .session_kit import state_of
from .spec_frames import (
    CLIENT_QM,
    EC_REQUEST,
    SERVER_QM,
    completed_user_message,
    corrected_establish_response,
    decode_one,
)
from .spec_peers import (
    QUEUE,
    SEQUENCE,
    Client,
    Server,
    T,
    client_message,
    only,
    sent_data,
)

#: The SID of the [MS-MQQB] §4.1.7 example's sender, 28 bytes.
EXAMPLE_SID = completed_user_message()[108:136]
#: UserHeader.Flags AH: the message arrived over HTTP (SRMP).
AH = 0x0200_0000


# --------------------------------------------------------------------------
# Piggy-backed SessionHeaders
# --------------------------------------------------------------------------


@pytest.mark.parametrize("counts_carrier", [False, True])
def test_a_transactional_message_carrying_a_session_header(counts_carrier: bool) -> None:
    server = Server()
    session = server.session
    order_ack = sp.order_ack(
        source=SERVER_QM, destination_qm=CLIENT_QM, sequence=SEQUENCE, number=1
    )
    session.send(order_ack, recoverable=False, tag="ours", now=T)
    # The client's message acknowledges our packet in a SessionHeader after PacketSize.
    header = sp.session_header(
        ack=1, sent=int(counts_carrier), recoverable_sent=int(counts_carrier), window=32
    )
    data = sp.piggy_back(client_message(1), header)
    assert int.from_bytes(data[8:12], "little") == len(data) - 16
    acked, arrived = session.receive(decode_one(data), T + 1)
    assert acked == Acked(tags=("ours",))
    assert isinstance(arrived, Arrived)
    assert arrived.recoverable_number == 1
    assert session.peer_window == 32
    assert session.unacked == 0
    # The message is what it would be without the header.
    receiver = server.receiver
    assert receiver.arrive(arrived.packet, "client") is not None
    decision = receiver.accept(
        arrived.packet, queue_key="orders", relayed=False, now=T + 1, wall=0.0
    )
    assert isinstance(decision, Accepted)
    assert state_of(session) is SessionState.OPEN


def test_an_order_ack_carrying_a_session_header() -> None:
    client = Client()
    client.sequence.add(101, EntryKind.TRANSACTIONAL)
    client.transmit(T + 1)
    # Windows' OrderAck, with its SessionAck piggy-backed: message 1 received and stored.
    order_ack = sp.order_ack(
        source=SERVER_QM, destination_qm=CLIENT_QM, sequence=SEQUENCE, number=1
    )
    data = sp.piggy_back(order_ack, sp.session_header(ack=1, base=1, bitmap=1))
    acked, arrived = client.session.receive(decode_one(data), T + 2)
    assert acked == Acked(tags=(101,))
    assert isinstance(arrived, Arrived)
    kind = client.receiver.arrive(arrived.packet, "server")
    assert isinstance(kind, OrderAckArrived)
    assert client.sequence.order_ack(kind.ack.sequence_id, kind.ack.sequence_number, T + 2) == (
        101,
    )


def test_a_piggy_backed_header_with_counts_we_cannot_match_closes() -> None:
    # §3.1.5.5: the peer's sent counts must be ours received; 5 is neither 0 nor 1.
    server = Server()
    data = sp.piggy_back(client_message(1), sp.session_header(ack=0, sent=5))
    [close] = server.session.receive(decode_one(data), T + 1)
    assert isinstance(close, Close)
    assert state_of(server.session) is SessionState.CLOSED


# --------------------------------------------------------------------------
# Headers qmgr does not use
# --------------------------------------------------------------------------

#: [MS-MQRR] §2.2.5 trailers: an ExtensionHeader (12 bytes: HeaderSize,
#: RemainingHeadersSize, Flags with SQ and EA, 3 reserved) then a 28-byte
#: ExtendedAddressHeader's worth of bytes.
MQRR_TRAILERS = struct.pack("<IIB3x", 12, 28, 0x12) + struct.pack("<II", 28, 2) + bytes(20)
#: [MS-MQRR] §2.2.5.1.2: an SRMPEnvelopeHeader (HeaderId, Reserved, DataLength,
#: UTF-16 data with its NUL, padded) and a CompoundMessageHeader (HeaderId,
#: Reserved, HTTPBodySize, MsgBodySize, MsgBodyOffset, data, padded).
_ENVELOPE = "<se:Envelope/>\0".encode("utf-16-le")
_COMPOUND = b"POST /msmq/private$/orders HTTP/1.1\r\n\r\norder"
SRMP_HEADERS = (
    struct.pack("<HHI", 0x0190, 0, len(_ENVELOPE) // 2)
    + _ENVELOPE
    + struct.pack("<HHIII", 0x01F4, 0, len(_COMPOUND), 5, len(_COMPOUND) - 5)
    + _COMPOUND
    + b"\0" * (-len(_COMPOUND) % 4)
)

UNUSED_HEADERS = {
    "security header with the sender's SID": {"security": sp.security_header(EXAMPLE_SID)},
    "security header with a signature": {
        "security": struct.pack("<HHHHII", 0x0081, 28, 0, 4, 0, 0) + EXAMPLE_SID + b"sig!"
    },
    "extension data": {"extension": b"\x01\x02\x03"},
    "soap header": {"soap": sp.soap_header("<h:x/>", "<b:y/>")},
    "MQRR trailers": {"trailer": MQRR_TRAILERS},
    "SRMP headers (AH)": {"extra_user_flags": AH, "trailer": SRMP_HEADERS},
    "reserved BaseHeader bit 0x1000": {"base_flags": 0x1000},
    "all of them": {
        "security": sp.security_header(EXAMPLE_SID),
        "extension": b"ext",
        "soap": sp.soap_header("<h/>", ""),
        "trailer": MQRR_TRAILERS,
        "base_flags": 0x1000,
    },
}


@pytest.mark.parametrize("name", sorted(UNUSED_HEADERS))
def test_headers_qmgr_does_not_use_are_ignored(name: str) -> None:
    server = Server()
    data = client_message(1, **UNUSED_HEADERS[name])
    assert data != client_message(1)
    packet = decode_one(data)
    assert wire.build_packet(packet) == data  # carried, so a relay passes them on
    assert isinstance(server.take(data, T + 1), Accepted)
    assert isinstance(server.take(client_message(2), T + 1), Accepted)
    assert state_of(server.session) is SessionState.OPEN
    # The message qmgr stores is the same with or without them.
    assert isinstance(packet, wire.UserMessage)
    plain = decode_one(client_message(1))
    assert isinstance(plain, wire.UserMessage)
    stored = wire.packet_to_message(packet, destination="DIRECT=" + QUEUE)
    assert stored.body == b"order 1"
    assert stored == wire.packet_to_message(plain, destination="DIRECT=" + QUEUE).replace(
        extension=stored.extension
    )
    # And the session acknowledges it: both stored.
    ack = decode_one(sent_data(server.session.timer(T + 100)))
    assert isinstance(ack, wire.SessionAck)
    assert (ack.session.ack_sequence_number, ack.session.recoverable_ack_flags) == (2, 0b11)


def test_the_example_s_express_message_with_its_acknowledgement_flags_is_taken() -> None:
    # Spec error in 4.1.7: all four acknowledgement bits are set without an admin
    # queue. The message is stored all the same; there is nowhere to send acks.
    packet = decode_one(completed_user_message())
    assert isinstance(packet, wire.UserMessage)
    assert packet.properties.flags == 0x0F
    assert packet.user.admin is None
    stored = wire.packet_to_message(packet, destination="DIRECT=OS:a04bm02\\q")
    assert (stored.acknowledge, stored.admin_queue) == (0x0F, "")


# --------------------------------------------------------------------------
# The window: pause and resume
# --------------------------------------------------------------------------


def test_a_window_of_one_sends_one_packet_at_a_time_until_it_grows() -> None:
    client = Client()
    session, sequence = client.session, client.sequence
    for lookup_id in range(101, 106):
        sequence.add(lookup_id, EntryKind.TRANSACTIONAL)
    client.transmit(T + 1)
    # Memory pressure: Windows acknowledges it and drops its window to 1.
    assert session.receive(decode_one(sp.session_ack(ack=1, window=1)), T + 2) == []
    assert session.peer_window == 1
    client.transmit(T + 2)
    assert not session.can_send()
    with pytest.raises(SessionError, match="window is full"):
        session.send(client_message(9), recoverable=True, tag=None, now=T + 2)
    # Each acknowledgement at window 1 lets exactly one more go.
    assert session.receive(decode_one(sp.session_ack(ack=2, window=1)), T + 3) == []
    assert session.can_send()
    client.transmit(T + 3)
    assert not session.can_send()
    # The window grows back (Windows doubles it every 30 s): what waits goes at once.
    assert session.receive(decode_one(sp.session_ack(ack=3, window=2)), T + 33) == []
    client.transmit(T + 33)
    client.transmit(T + 33)
    assert (session.unacked, session.can_send()) == (2, False)
    assert session.receive(decode_one(sp.session_ack(ack=5, window=64)), T + 63) == []
    assert (session.unacked, session.can_send(), session.peer_window) == (0, True, 64)
    assert state_of(session) is SessionState.OPEN


def test_a_window_of_one_announced_at_connection() -> None:
    client = Client(peer_window=1)
    assert client.session.peer_window == 1
    client.sequence.add(101, EntryKind.TRANSACTIONAL)
    client.sequence.add(102, EntryKind.TRANSACTIONAL)
    client.transmit(T + 1)
    assert not client.session.can_send()


def test_a_window_of_zero_counts_as_one() -> None:
    client = Client()
    client.session.receive(decode_one(sp.session_ack(ack=0, window=0)), T + 1)
    assert client.session.peer_window == 1
    assert client.session.can_send()


# --------------------------------------------------------------------------
# EstablishConnection.OperatingSystem, both encodings
# --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("requested", "answered"),
    [
        # The spec's encoding: RE the low byte, SE 0x0100; OS and QS not echoed.
        (0x0310, 0x0110),  # the §4.1.3 example: SE and OS
        (0x0110, 0x0110),
        (0x0410, 0x0010),
        (0x0010, 0x0010),
        # Most significant bit first (zgrab2): RE the high byte, SE 0x0080.
        (0x1080, 0x1080),  # zgrab2's request
        (0x10C0, 0x1080),
        (0x1000, 0x1000),
        # Neither: the spec's encoding, no SE.
        (0x0000, 0x0010),
        (0xFFFF, 0x0010),
    ],
)
def test_the_no_ping_bit_is_echoed_in_the_request_s_encoding(requested: int, answered: int) -> None:
    b = PeerSession(Role.ACCEPTOR, local_qm=SERVER_QM, now=T)
    b.start(T)
    request = EC_REQUEST[:56] + requested.to_bytes(2, "little") + EC_REQUEST[58:]
    response = sent_data(b.receive(decode_one(request), T))
    assert int.from_bytes(response[56:58], "little") == answered
    assert state_of(b) is SessionState.WAITING_CP


def zgrab2_request(timestamp: int) -> bytes:
    """The EstablishConnection zgrab2's msmq module sends: BaseHeader Reserved 0,
    flags PR=3 | IN, both GUIDs NULL, OperatingSystem 0x1080, zero padding."""
    return (
        sp.base_header(0x000B, 572, reserved=0)
        + struct.pack("<HH", 0, 2)
        + bytes(32)
        + struct.pack("<IHH", timestamp, 0x1080, 0)
        + bytes(512)
    )


def test_zgrab2_s_request_is_answered() -> None:
    b = PeerSession(Role.ACCEPTOR, local_qm=SERVER_QM, now=T)
    b.start(T)
    response = sent_data(b.receive(decode_one(zgrab2_request(0x01020304)), T))
    # What zgrab2 checks: version, signature, PT=2, CS clear, 0x5A padding; and
    # in its own reading of OperatingSystem, RE 0x10 in the high byte and SE set.
    assert (response[0], response[4:8]) == (0x10, b"LIOR")
    internal = int.from_bytes(response[18:20], "little")
    assert (internal & 0x000F, internal & 0x0010) == (2, 0)
    assert response[60:] == b"\x5a" * 512
    assert response[20:36] == bytes(16)  # its NULL ClientGuid, echoed
    assert response[36:52] == SERVER_QM.bytes_le
    assert response[52:56] == (0x01020304).to_bytes(4, "little")
    assert int.from_bytes(response[56:58], "little") == 0x1080


# --------------------------------------------------------------------------
# GUIDs in Windows' byte order
# --------------------------------------------------------------------------


def test_guids_are_read_and_written_in_windows_byte_order() -> None:
    client_qm = uuid.UUID("00112233-4455-6677-8899-aabbccddeeff")
    assert client_qm.bytes_le != client_qm.bytes
    b = PeerSession(Role.ACCEPTOR, local_qm=SERVER_QM, now=T)
    b.start(T)
    request = EC_REQUEST[:20] + client_qm.bytes_le + EC_REQUEST[36:]
    assert request[20:24] == bytes.fromhex("33221100")  # Data1 little-endian
    response = sent_data(b.receive(decode_one(request), T))
    assert b.remote_qm == client_qm
    assert response[20:36] == client_qm.bytes_le
    assert response[36:52] == SERVER_QM.bytes_le


@pytest.mark.parametrize("windows_order", [True, False])
def test_an_initiator_recognises_its_peer_only_in_windows_byte_order(windows_order: bool) -> None:
    a = PeerSession(Role.INITIATOR, local_qm=CLIENT_QM, remote_qm=SERVER_QM, now=T)
    a.start(T)
    server = SERVER_QM.bytes_le if windows_order else SERVER_QM.bytes
    response = corrected_establish_response()
    response = response[:36] + server + response[52:]
    actions = a.receive(decode_one(response), T)
    if windows_order:
        assert state_of(a) is SessionState.WAITING_CPR
    else:
        close = only(actions, Close)
        assert isinstance(close, Close)
        assert f"expected queue manager {SERVER_QM}" in close.reason
