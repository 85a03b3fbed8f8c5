"""The [MS-MQQB] §4.1 example session replayed against qmgr's session machine.

Each side of the example is played by the spec's own bytes, and qmgr plays the
other: first qmgr as the ACCEPTOR (the example's server, fed the client's
frames 4.1.3, 4.1.5 and 4.1.7, answering with 4.1.4, 4.1.6 and 4.1.8), then as
the INITIATOR (the example's client, fed 4.1.4, 4.1.6 and 4.1.8). What qmgr
sends is compared byte for byte where the spec fixes the bytes, and field by
field where it leaves them free: the BaseHeader's Reserved byte (garbage), a
request's padding (uninitialised), the OperatingSystem bits other than RE and
SE (they describe the initiator), the TimeStamp (the initiator's clock). Two
spec errors are corrected first (:mod:`.spec_frames`): 4.1.4's GUIDs and the
truncation of 4.1.7. No socket, no sleep: time is the explicit ``now``.
"""

from __future__ import annotations

import pytest

import wire
from qmgr.protocol import (
    Acked,
    Arrived,
    Close,
    Opened,
    PeerSession,
    Role,
    Send,
    SessionSettings,
    SessionState,
)

from .session_kit import state_of
from .spec_frames import (
    ACK_TIMEOUT,
    CLIENT_NOW,
    CLIENT_QM,
    CP_REQUEST,
    CP_RESPONSE,
    EC_REQUEST,
    EC_RESPONSE,
    RECOVERABLE_ACK_TIMEOUT,
    SERVER_QM,
    SESSION_ACK,
    USER_MESSAGE_TRUNCATED,
    completed_user_message,
    corrected_establish_response,
    decode_one,
    fixed_bytes,
)

#: The acceptor's clock (any origin: the acceptor never sends its own time).
T = 50_000.0
NO_PING = int(wire.OperatingSystemFlags.NO_PING)
#: The settings that make qmgr announce what the example's client announces.
CLIENT_SETTINGS = SessionSettings(
    window_size=64, ack_timeout=ACK_TIMEOUT, recoverable_ack_timeout=RECOVERABLE_ACK_TIMEOUT
)


def os_field(data: bytes) -> int:
    """EstablishConnection.OperatingSystem (u16 LE at offset 56)."""
    return int.from_bytes(data[56:58], "little")


def sent_bytes(action: object) -> bytes:
    assert isinstance(action, Send)
    return action.data


# --------------------------------------------------------------------------
# qmgr as the example's server
# --------------------------------------------------------------------------


def open_acceptor() -> PeerSession:
    """An acceptor that went through 4.1.3 and 4.1.5 (checked in the tests below)."""
    b = PeerSession(Role.ACCEPTOR, local_qm=SERVER_QM, now=T)
    b.start(T)
    b.receive(decode_one(EC_REQUEST), T)
    b.receive(decode_one(CP_REQUEST), T)
    assert state_of(b) is SessionState.OPEN
    return b


def test_acceptor_answers_4_1_3_as_4_1_4() -> None:
    b = PeerSession(Role.ACCEPTOR, local_qm=SERVER_QM, now=T)
    assert b.start(T) == []
    [send] = b.receive(decode_one(EC_REQUEST), T)
    response = sent_bytes(send)
    expected = corrected_establish_response()
    assert len(response) == len(expected) == 572
    # Fixed: version, flags 0x000B (PR=3, IN), signature, PacketSize, TTRQ,
    # InternalHeader PT=2 without CS, ClientGuid and TimeStamp echoed, ServerGuid ours.
    assert fixed_bytes(response[:56]) == fixed_bytes(expected[:56])
    assert response[2:4] == b"\x0b\x00"
    assert response[20:36] == EC_REQUEST[20:36]
    assert response[52:56] == EC_REQUEST[52:56]
    # OperatingSystem: RE is 0x10 and the request's SE is echoed (the example's
    # 10 03 sets it); the OS bit describes the initiator and is not echoed.
    assert os_field(EC_REQUEST) & NO_PING
    assert os_field(response) & 0xFF == 0x10
    assert os_field(response) & NO_PING == NO_PING
    # Reserved 0, then the response's padding: 512 bytes of 0x5A, byte for byte.
    assert response[58:] == expected[58:] == b"\x00\x00" + b"\x5a" * 512
    assert state_of(b) is SessionState.WAITING_CP
    assert b.remote_qm == CLIENT_QM


def test_acceptor_answers_4_1_5_as_4_1_6_and_opens() -> None:
    b = PeerSession(Role.ACCEPTOR, local_qm=SERVER_QM, now=T)
    b.start(T)
    b.receive(decode_one(EC_REQUEST), T)
    send, opened = b.receive(decode_one(CP_REQUEST), T + 0.01)
    # The timeouts echoed, our window (64, the example's), byte for byte.
    assert fixed_bytes(sent_bytes(send)) == fixed_bytes(CP_RESPONSE)
    assert opened == Opened(remote_qm=CLIENT_QM, peer_window=64)
    assert state_of(b) is SessionState.OPEN
    # The initiator's timeouts are adopted (120000 ms and 1496 ms in 4.1.5).
    assert (b.ack_timeout, b.recoverable_ack_timeout) == (120.0, 1.496)


def test_acceptor_takes_4_1_7_and_acknowledges_it_with_4_1_8() -> None:
    b = open_acceptor()
    data = completed_user_message()
    now = T + 1
    [arrived] = b.receive(decode_one(data), now)
    assert isinstance(arrived, Arrived)
    assert arrived.recoverable_number is None  # express: nothing to persist
    assert wire.build_packet(arrived.packet) == data
    # The Session Ack Send timer: AckWaitTimeout / 2 after the first unacknowledged packet.
    assert b.next_deadline() == now + ACK_TIMEOUT / 2
    assert b.timer(now + ACK_TIMEOUT / 2 - 0.001) == []
    [ack] = b.timer(now + ACK_TIMEOUT / 2)
    # AckSequenceNumber 1, nothing recoverable, nothing sent by us, window 64: the
    # example's SessionAck byte for byte (but the Reserved byte, 0xCD there).
    assert fixed_bytes(sent_bytes(ack)) == fixed_bytes(SESSION_ACK)
    assert b.next_deadline() == now + 300.0  # only the idle timer is left


def test_acceptor_waits_for_the_rest_of_the_truncated_4_1_7() -> None:
    b = open_acceptor()
    decoder = wire.FrameDecoder()
    decoder.receive_data(USER_MESSAGE_TRUNCATED)
    assert decoder.next_packet() is None  # 574 bytes short: nothing for the session yet
    decoder.receive_data(completed_user_message()[len(USER_MESSAGE_TRUNCATED) :])
    packet = decoder.next_packet()
    assert packet is not None
    [arrived] = b.receive(packet, T + 1)
    assert isinstance(arrived, Arrived)
    assert state_of(b) is SessionState.OPEN


# --------------------------------------------------------------------------
# qmgr as the example's client
# --------------------------------------------------------------------------


def initiator(*, by_direct_name: bool = False) -> PeerSession:
    return PeerSession(
        Role.INITIATOR,
        local_qm=CLIENT_QM,
        remote_qm=None if by_direct_name else SERVER_QM,
        settings=CLIENT_SETTINGS,
        now=CLIENT_NOW,
    )


def test_initiator_sends_4_1_3() -> None:
    a = initiator()
    [send] = a.start(CLIENT_NOW)
    request = sent_bytes(send)
    assert len(request) == 572
    # Fixed: the BaseHeader (but Reserved), PT=2, the GUIDs; TimeStamp is our clock
    # in ms, here the example client's.
    assert fixed_bytes(request[:56]) == fixed_bytes(EC_REQUEST[:56])
    # RE 0x10 and SE (no ping sent before this session) as in the example; we
    # do not claim the OS bit (informational).
    assert os_field(request) == 0x0110
    assert os_field(request) & (0xFF | NO_PING) == os_field(EC_REQUEST) & (0xFF | NO_PING)
    assert request[58:60] == b"\x00\x00"
    # The request's padding is free; it parses as a request all the same.
    packet = decode_one(request)
    assert isinstance(packet, wire.EstablishConnection)
    assert not packet.refused
    assert state_of(a) is SessionState.WAITING_ECR


def test_initiator_by_direct_name_sends_a_null_server_guid() -> None:
    a = initiator(by_direct_name=True)
    [send] = a.start(CLIENT_NOW)
    assert sent_bytes(send)[36:52] == bytes(16)
    [send] = a.receive(decode_one(corrected_establish_response()), CLIENT_NOW + 0.001)
    assert fixed_bytes(sent_bytes(send)) == fixed_bytes(CP_REQUEST)
    assert a.remote_qm == SERVER_QM  # learnt from the response


def test_initiator_replays_the_example_session() -> None:
    a = initiator()
    a.start(CLIENT_NOW)
    now = CLIENT_NOW + 0.001
    [send] = a.receive(decode_one(corrected_establish_response()), now)
    # 4.1.5 byte for byte (but Reserved): RecoverableAckTimeout 1496 ms,
    # AckTimeout 120000 ms, WindowSize 64.
    assert fixed_bytes(sent_bytes(send)) == fixed_bytes(CP_REQUEST)
    assert state_of(a) is SessionState.WAITING_CPR
    [opened] = a.receive(decode_one(CP_RESPONSE), now)
    assert opened == Opened(remote_qm=SERVER_QM, peer_window=64)
    # 4.1.7 goes out as it is: the session adds nothing to a user packet.
    data = completed_user_message()
    assert a.can_send()
    assert a.send(data, recoverable=False, tag="4.1.7", now=now) == data
    assert a.unacked == 1
    assert a.next_deadline() == now + ACK_TIMEOUT  # the Session Ack Wait timer
    # 4.1.8 acknowledges it; its counts (0 sent by the server) agree with ours.
    assert a.receive(decode_one(SESSION_ACK), now + 1) == [Acked(tags=("4.1.7",))]
    assert (a.unacked, a.peer_window) == (0, 64)
    assert a.next_deadline() == now + 300.0  # idle only: nothing awaits an ack
    assert state_of(a) is SessionState.OPEN


def test_initiator_closes_on_the_uncorrected_4_1_4() -> None:
    # Spec error: 4.1.4's ClientGuid is not the request's. A response that does
    # not echo our ClientGuid ends the session ([MS-MQQB] §3.1.5.3).
    a = initiator()
    a.start(CLIENT_NOW)
    [close] = a.receive(decode_one(EC_RESPONSE), CLIENT_NOW + 0.001)
    assert isinstance(close, Close)
    assert str(CLIENT_QM) in close.reason
    assert state_of(a) is SessionState.CLOSED


@pytest.mark.parametrize("role", [Role.ACCEPTOR, Role.INITIATOR])
def test_the_example_s_own_frames_in_the_wrong_state_close(role: Role) -> None:
    # 4.1.8 before the handshake is over: any packet out of its state closes.
    if role is Role.ACCEPTOR:
        session = PeerSession(Role.ACCEPTOR, local_qm=SERVER_QM, now=T)
        session.start(T)
    else:
        session = initiator()
        session.start(CLIENT_NOW)
    [close] = session.receive(decode_one(SESSION_ACK), T)
    assert isinstance(close, Close)
    assert "SessionAck" in close.reason
    assert state_of(session) is SessionState.CLOSED
