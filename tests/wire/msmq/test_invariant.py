"""The invariant: any bytes either parse or raise RemoteProtocolError, never anything else.

Checked against the production code paths (parse_packet and FrameDecoder) on
random bytes, on random bodies behind a plausible BaseHeader, and on valid
packets mutated the ways a broken or hostile peer would: truncated, extended,
sizes lied about, bits flipped, fields overwritten, NUL terminators removed.
Whatever parses must also rebuild to exactly the bytes it came from.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import wire

from . import msmq_decoding as md
from . import msmq_strategies as ms

FAST = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
LIGHT = settings(max_examples=100, deadline=None)
SOAK = settings(max_examples=20_000, deadline=None, suppress_health_check=list(HealthCheck))


def check_parse(data: bytes) -> None:
    result = md.round_trip(wire.parse_packet, wire.build_packet, data)
    if isinstance(result, wire.RemoteProtocolError):
        assert result.field
        assert str(result).startswith(result.field)


def check_decoder(data: bytes) -> None:
    """Feed ``data`` whole and byte by byte; the two must agree with each other and with
    parse_packet on the packets they return."""
    outcomes = []
    for chunks in ([data], md.bytewise(data)):
        packets, error = md.decode(chunks)
        consumed = sum(len(wire.build_packet(p)) for p in packets)
        assert b"".join(map(wire.build_packet, packets)) == data[:consumed]
        outcomes.append((packets, None if error is None else error.field))
    assert outcomes[0] == outcomes[1]


def check(data: bytes) -> None:
    check_parse(data)
    check_decoder(data)


def plausible_header(size: int, flags: int) -> bytes:
    return (
        b"\x10\x00"
        + flags.to_bytes(2, "little")
        + b"LIOR"
        + size.to_bytes(4, "little")
        + b"\xff\xff\xff\xff"
    )


@st.composite
def framed_noise(draw: st.DrawFn) -> bytes:
    """Random bytes behind a BaseHeader that passes the framing checks."""
    flags = draw(st.sampled_from([0x0003, 0x0013, 0x0023, 0x000B, 0x001B]) | ms.u16)
    body = draw(st.binary(min_size=4, max_size=400))
    size = 16 + len(body)
    if flags & 0x0018 == 0x0010:  # a user packet with SH: PacketSize excludes 16 bytes
        size -= 16
    size = draw(st.sampled_from([size, 32, 36, 572, 120]) | st.integers(0, size + 64))
    return plausible_header(size, flags) + body


@st.composite
def mutated_packets(draw: st.DrawFn) -> bytes:
    data = bytearray(wire.build_packet(draw(ms.packets)))
    for _ in range(draw(st.integers(1, 3))):
        kind = draw(
            st.sampled_from(
                ["truncate", "extend", "flip", "byte", "u16", "u32", "size", "flags", "unterminate"]
            )
        )
        if kind == "truncate":
            del data[draw(st.integers(0, len(data))) :]
        elif kind == "extend":
            data += draw(st.binary(min_size=1, max_size=40))
        elif not data:
            continue
        elif kind == "flip":
            data[draw(st.integers(0, len(data) - 1))] ^= 1 << draw(st.integers(0, 7))
        elif kind == "byte":
            data[draw(st.integers(0, len(data) - 1))] = draw(ms.u8)
        elif kind in ("u16", "u32"):
            width = 2 if kind == "u16" else 4
            if len(data) >= width:
                at = draw(st.integers(0, len(data) - width))
                value = draw(st.integers(0, (1 << (8 * width)) - 1))
                data[at : at + width] = value.to_bytes(width, "little")
        elif kind == "size" and len(data) >= 12:
            lie = draw(st.integers(0, len(data) + 64) | ms.u32)
            data[8:12] = lie.to_bytes(4, "little")
        elif kind == "flags" and len(data) >= 64:
            data[2] ^= draw(ms.u8)
            data[60 + draw(st.integers(0, 3))] ^= draw(ms.u8)
        elif kind == "unterminate":
            nuls = [i for i in range(0, len(data) - 1, 2) if data[i : i + 2] == b"\x00\x00"]
            if nuls:
                at = draw(st.sampled_from(nuls))
                data[at] = 0x41
    return bytes(data)


@FAST
@given(st.binary(max_size=300))
def test_random_bytes(data: bytes) -> None:
    check(data)


@FAST
@given(framed_noise())
def test_random_bodies_behind_a_valid_header(data: bytes) -> None:
    check(data)


@FAST
@given(mutated_packets())
def test_mutated_packets(data: bytes) -> None:
    check(data)


@LIGHT
@given(ms.user_messages(), st.data())
def test_every_truncation_of_a_user_message_waits_or_fails_cleanly(
    message: wire.UserMessage, data: st.DataObject
) -> None:
    raw = wire.build_packet(message)
    cut = data.draw(st.integers(0, len(raw) - 1))
    with pytest.raises(wire.RemoteProtocolError):
        wire.parse_packet(raw[:cut])
    decoder = wire.FrameDecoder()
    decoder.receive_data(raw[:cut])
    assert decoder.next_packet() is None


@LIGHT
@given(ms.user_messages(), st.integers(1, 64))
def test_packet_size_lies_are_refused(message: wire.UserMessage, delta: int) -> None:
    raw = bytearray(wire.build_packet(message))
    size = int.from_bytes(raw[8:12], "little")
    for lie in (size - delta, size + delta):
        raw[8:12] = lie.to_bytes(4, "little")
        check(bytes(raw))
        if lie > size:
            with pytest.raises(wire.RemoteProtocolError):
                wire.parse_packet(bytes(raw))


@pytest.mark.soak
@SOAK
@given(st.one_of(st.binary(max_size=2000), framed_noise(), mutated_packets()))
def test_soak(data: bytes) -> None:
    check(data)
