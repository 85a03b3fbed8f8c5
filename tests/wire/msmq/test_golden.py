"""The [MS-MQQB] §4.1 example frames, field by field, including the spec's own errors."""

from __future__ import annotations

import uuid

import pytest

import wire

from .msmq_samples import WHOLE_FRAMES, completed_user_message, frame

CLIENT_QM = uuid.UUID("557358d1-9150-9595-4997-b6e611ea26c6")
SERVER_QM = uuid.UUID("43cd8907-394c-8f11-4445-9078909ea0fc")


@pytest.mark.parametrize("name", WHOLE_FRAMES)
def test_whole_frames_rebuild_byte_for_byte(name: str) -> None:
    data = frame(name)
    assert wire.build_packet(wire.parse_packet(data)) == data


def test_guid_renderings_in_the_annotations_are_byte_reversals() -> None:
    raw = frame("4.1.3-establish-connection-request")[20:36]
    assert uuid.UUID(bytes_le=raw) == CLIENT_QM
    # The annotation's {C626EA11-E6B6-9749-9595-9150557358D1} is the dump reversed.
    assert uuid.UUID(bytes=raw[::-1]) == uuid.UUID("C626EA11-E6B6-9749-9595-9150557358D1")


def test_establish_connection_request() -> None:
    packet = wire.parse_packet(frame("4.1.3-establish-connection-request"))
    assert isinstance(packet, wire.EstablishConnection)
    assert packet.base == wire.BaseHeader(
        priority=3, flags=0, reserved=0xC0, time_to_reach_queue=0xFFFFFFFF
    )
    assert packet.internal == wire.InternalHeader(flags=0, reserved=0)
    assert not packet.refused
    assert packet.client_qm == CLIENT_QM
    assert packet.server_qm == SERVER_QM
    assert packet.timestamp == 501140046
    # Spec error: annotated OperatingSystem 0 / Reserved 784; the bytes 10 03 00 00 say this.
    assert packet.operating_system == 0x0310
    assert packet.operating_system & 0xFF == 0x10
    assert packet.operating_system & wire.OperatingSystemFlags.NO_PING
    assert packet.operating_system & wire.OperatingSystemFlags.SERVER
    assert packet.reserved == 0
    assert packet.padding == b"\x5a" * 512


def test_establish_connection_response() -> None:
    packet = wire.parse_packet(frame("4.1.4-establish-connection-response"))
    assert isinstance(packet, wire.EstablishConnection)
    assert packet.base.reserved == 0x5A
    # Spec error: the annotation names the request's GUIDs; the bytes carry two others.
    assert packet.client_qm == uuid.UUID("1f742305-be5e-4177-bc77-c4dd7719e474")
    assert packet.server_qm == uuid.UUID("3c3a6aeb-f567-4143-87d3-85cf4d68ceb4")
    assert packet.timestamp == 501140046
    assert packet.operating_system == 0x0310
    assert packet.padding == b"\x5a" * 512


@pytest.mark.parametrize(
    "name", ["4.1.5-connection-parameters-request", "4.1.6-connection-parameters-response"]
)
def test_connection_parameters(name: str) -> None:
    packet = wire.parse_packet(frame(name))
    assert packet == wire.ConnectionParameters(
        base=wire.BaseHeader(priority=3, reserved=0xC0),
        internal=wire.InternalHeader(),
        recoverable_ack_timeout=1496,
        ack_timeout=120000,
        reserved=0,
        # Spec error in 4.1.6: annotated WindowSize 32; both frames' bytes say 64.
        window_size=64,
    )


def test_session_ack() -> None:
    data = frame("4.1.8-session-ack")
    packet = wire.parse_packet(data)
    assert packet == wire.SessionAck(
        base=wire.BaseHeader(priority=3, reserved=0xCD),
        internal=wire.InternalHeader(),
        session=wire.SessionHeader(ack_sequence_number=1, window_size=64),
    )
    assert int.from_bytes(data[2:4], "little") == 0x001B  # PR=3, IN, SH
    # A stand-alone SessionAck counts its SessionHeader in PacketSize.
    assert int.from_bytes(data[8:12], "little") == len(data) == 36


@pytest.mark.parametrize(
    ("name", "flags", "qm"),
    [("4.1.1-ping-request", 0x7D01, CLIENT_QM), ("4.1.2-ping-response", 0xB295, SERVER_QM)],
)
def test_pings(name: str, flags: int, qm: uuid.UUID) -> None:
    data = frame(name)
    ping = wire.parse_ping(data)
    assert ping == wire.Ping(flags=flags, cookie=4, qm=qm)
    assert wire.build_ping(ping) == data
    # A ping has no BaseHeader: it is not a session packet.
    with pytest.raises(wire.RemoteProtocolError):
        wire.parse_packet(data)


def test_truncated_user_message_is_refused_whole_and_awaited_by_the_decoder() -> None:
    data = frame("4.1.7-user-message-truncated")
    assert len(data) == 1650
    with pytest.raises(wire.RemoteProtocolError) as info:
        wire.parse_packet(data)
    assert info.value.field == "BaseHeader.PacketSize"
    assert "2224" in str(info.value)
    decoder = wire.FrameDecoder()
    decoder.receive_data(data)
    assert decoder.next_packet() is None
    assert decoder.buffered == 1650
    decoder.receive_data(completed_user_message()[1650:])
    assert isinstance(decoder.next_packet(), wire.UserMessage)
    assert decoder.buffered == 0


def test_completed_user_message_field_by_field() -> None:
    data = completed_user_message()
    assert len(data) == 2224
    message = wire.parse_packet(data)
    assert isinstance(message, wire.UserMessage)
    assert wire.build_packet(message) == data
    assert wire.classify_packet(message) is wire.PacketKind.USER_MESSAGE

    assert message.base == wire.BaseHeader(
        priority=3, flags=0, reserved=0, time_to_reach_queue=345600
    )
    assert int.from_bytes(data[60:64], "little") == 0x00281C00  # DQ=7, SH, MP

    user = message.user
    assert user.source_qm == CLIENT_QM
    assert user.destination_qm == wire.NULL_GUID
    assert user.time_to_be_received == wire.INFINITE
    # Spec error: annotated 1141966310; the bytes are a copy of the signature "LIOR".
    assert user.sent_time == 0x524F494C
    assert data[52:56] == b"LIOR"
    assert user.message_id == 2286
    assert (user.hop_count, user.delivery, user.flags) == (0, wire.DeliveryMode.EXPRESS, 0)
    assert user.destination == wire.DirectQueue(name="OS:a04bm02\\q")
    assert (user.admin, user.response, user.connector_type) == (None, None, None)

    assert message.transaction is None
    security = message.security
    assert security is not None
    assert security.flags == 0x0001  # ST=1 (SID), AI clear although the SID is present
    assert not security.flags & wire.SecurityFlags.DATA_PRESENT
    assert len(security.sender_id) == 28
    assert (security.encryption_key, security.signature, security.sender_cert) == (b"", b"", b"")
    assert (security.provider_info, security.padding) == (b"", b"")
    revision, count = security.sender_id[0], security.sender_id[1]
    authority = int.from_bytes(security.sender_id[2:8], "big")
    sub_authorities = [
        int.from_bytes(security.sender_id[8 + 4 * i : 12 + 4 * i], "little") for i in range(count)
    ]
    assert (revision, authority, sub_authorities) == (
        1,
        5,
        [21, 3181267629, 1039849782, 3663111779, 1000],
    )

    properties = message.properties
    # Spec error: annotated "no acknowledgement"; the byte is 0x0F, with no admin queue.
    assert properties.flags == 0x0F
    assert user.admin is None
    assert properties.label == "mqsender label"
    assert data[137] == 15  # LabelLength, WCHARs with the NUL
    assert properties.message_class == wire.MessageClass.NORMAL
    assert properties.correlation_id == bytes(20)
    assert properties.body_type == wire.VarType.BSTR
    assert properties.application_tag == 0
    assert len(properties.body) == 2000
    assert properties.body == "a".encode("utf-16-le") * 1000
    # Spec error: annotated AllocationBodySize 20; the bytes say 2000, the body size.
    assert int.from_bytes(data[172:176], "little") == 2000
    assert properties.allocation_body_size is None
    assert properties.privacy_level == wire.PrivacyLevel.NONE
    assert properties.hash_algorithm == wire.HashAlgorithm.SHA1
    # Spec error: annotated 26113 (0x6601) "RC4"; the bytes are 0x6801, which is RC4.
    assert properties.encryption_algorithm == 0x6801
    assert properties.encryption_algorithm == wire.EncryptionAlgorithm.RC4
    assert properties.extension == b""
    # The layout needs 2 padding bytes (2222 -> 2224), not the annotated 1.
    assert properties.padding == b""
    assert (message.debug, message.soap, message.multi_queue, message.session) == (
        None,
        None,
        None,
        None,
    )
    assert message.trailer == b""


def test_padding_bytes_are_carried() -> None:
    data = completed_user_message(padding=b"\xc0\xde")
    message = wire.parse_packet(data)
    assert isinstance(message, wire.UserMessage)
    assert message.properties.padding == b"\xc0\xde"
    assert wire.build_packet(message) == data
