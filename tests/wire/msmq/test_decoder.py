"""FrameDecoder: every case whole, one byte at a time, and followed by the next packet."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import wire

from . import msmq_decoding as md
from . import msmq_samples as samples
from . import msmq_strategies as ms

GOLDEN = {
    "establish-connection-request": samples.frame("4.1.3-establish-connection-request"),
    "establish-connection-response": samples.frame("4.1.4-establish-connection-response"),
    "connection-parameters": samples.frame("4.1.5-connection-parameters-request"),
    "session-ack": samples.frame("4.1.8-session-ack"),
    "user-message": samples.completed_user_message(),
}
NEXT_START = GOLDEN["session-ack"][:10]


def feed_whole(decoder: wire.FrameDecoder, data: bytes) -> list[wire.Packet]:
    return md.feed(decoder, [data])


def feed_bytewise(decoder: wire.FrameDecoder, data: bytes) -> list[wire.Packet]:
    return md.feed(decoder, md.bytewise(data))


FEEDERS: dict[str, Callable[[wire.FrameDecoder, bytes], list[wire.Packet]]] = {
    "whole": feed_whole,
    "bytewise": feed_bytewise,
}


def check_three_ways(data: bytes) -> wire.Packet:
    """Decode ``data`` whole, byte by byte, and followed by the start of another packet."""
    expected = wire.parse_packet(data)
    for feed in FEEDERS.values():
        decoder = wire.FrameDecoder()
        assert feed(decoder, data) == [expected]
        assert decoder.buffered == 0
        assert decoder.next_packet() is None
    for feed in FEEDERS.values():
        decoder = wire.FrameDecoder()
        assert feed(decoder, data + NEXT_START) == [expected]
        assert decoder.buffered == len(NEXT_START)
        decoder.receive_data(GOLDEN["session-ack"][len(NEXT_START) :])
        assert isinstance(decoder.next_packet(), wire.SessionAck)
    return expected


@pytest.mark.parametrize("name", sorted(GOLDEN))
def test_golden_frames_three_ways(name: str) -> None:
    check_three_ways(GOLDEN[name])


@settings(max_examples=150, deadline=None)
@given(ms.packets)
def test_generated_packets_three_ways(packet: wire.Packet) -> None:
    assert check_three_ways(wire.build_packet(packet)) == packet


@settings(max_examples=50, deadline=None)
@given(st.lists(ms.packets, min_size=1, max_size=6), st.data())
def test_a_stream_of_packets_in_random_chunks(
    packets: list[wire.Packet], data: st.DataObject
) -> None:
    stream = b"".join(map(wire.build_packet, packets))
    cuts = sorted(data.draw(st.lists(st.integers(0, len(stream)), max_size=12)))
    decoder = wire.FrameDecoder()
    assert md.feed(decoder, md.split_at(stream, cuts)) == packets
    assert decoder.buffered == 0


@pytest.mark.parametrize("feed", sorted(FEEDERS))
def test_session_header_after_packet_size(feed: str) -> None:
    # A user packet with SH is PacketSize + 16 bytes; PacketSize excludes the trailer.
    message = wire.parse_packet(samples.completed_user_message())
    assert isinstance(message, wire.UserMessage)
    with_ack = wire.UserMessage(
        base=message.base,
        user=message.user,
        security=message.security,
        properties=message.properties,
        session=wire.SessionHeader(ack_sequence_number=7, window_size=64),
    )
    data = wire.build_packet(with_ack)
    assert len(data) == 2224 + 16
    assert int.from_bytes(data[8:12], "little") == 2224
    assert int.from_bytes(data[2:4], "little") & wire.BaseFlags.SESSION
    decoder = wire.FrameDecoder()
    assert FEEDERS[feed](decoder, data + NEXT_START) == [with_ack]
    assert decoder.buffered == len(NEXT_START)


@pytest.mark.parametrize("feed", sorted(FEEDERS))
def test_incomplete_packets_wait(feed: str) -> None:
    for data in GOLDEN.values():
        decoder = wire.FrameDecoder()
        assert FEEDERS[feed](decoder, data[:-1]) == []
        assert decoder.buffered == len(data) - 1


def header(
    *, size: int, flags: int = 0x0003, version: int = 0x10, signature: bytes = b"LIOR"
) -> bytes:
    return (
        bytes([version, 0])
        + flags.to_bytes(2, "little")
        + signature
        + size.to_bytes(4, "little")
        + b"\xff\xff\xff\xff"
    )


@pytest.mark.parametrize(
    ("data", "field"),
    [
        (header(size=wire.MAX_PACKET_SIZE + 1), "BaseHeader.PacketSize"),
        (header(size=0xFFFFFFFF), "BaseHeader.PacketSize"),
        (header(size=15), "BaseHeader.PacketSize"),
        (header(size=119), "BaseHeader.PacketSize"),
        (header(size=100, flags=0x000B), "BaseHeader.PacketSize"),
        (header(size=200, version=0x11), "BaseHeader.VersionNumber"),
        (header(size=200, signature=b"ROIL"), "BaseHeader.Signature"),
    ],
)
@pytest.mark.parametrize("feed", sorted(FEEDERS))
def test_bad_headers_are_refused_before_the_body_arrives(
    data: bytes, field: str, feed: str
) -> None:
    decoder = wire.FrameDecoder()
    with pytest.raises(wire.RemoteProtocolError) as info:
        FEEDERS[feed](decoder, data)
    assert info.value.field == field
    # The error is final.
    decoder.receive_data(GOLDEN["session-ack"])
    with pytest.raises(wire.RemoteProtocolError) as again:
        decoder.next_packet()
    assert again.value is info.value


def test_max_packet_size_can_be_lowered() -> None:
    decoder = wire.FrameDecoder(max_packet_size=1024)
    decoder.receive_data(GOLDEN["user-message"][:16])
    with pytest.raises(wire.RemoteProtocolError, match="over the limit of 1024"):
        decoder.next_packet()
    with pytest.raises(ValueError, match="max_packet_size"):
        wire.FrameDecoder(max_packet_size=wire.MAX_PACKET_SIZE + 1)


def test_a_malformed_body_is_an_error_after_framing() -> None:
    bad = bytearray(GOLDEN["connection-parameters"])
    bad[18] = 0x07  # InternalHeader PT=7
    for feed in FEEDERS.values():
        decoder = wire.FrameDecoder()
        with pytest.raises(wire.RemoteProtocolError, match="PT=7"):
            feed(decoder, bytes(bad))
