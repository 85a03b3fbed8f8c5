"""The invariant on two more inputs: UDP pings and user messages with a piggy-backed
SessionHeader, seeded with the [MS-MQQB] §4.1 vectors.

* ``wire.parse_ping``: any datagram is a :class:`wire.Ping` or a
  ``wire.RemoteProtocolError`` naming its field, never another exception; a
  ping rebuilds to exactly its bytes.
* user messages carrying a SessionHeader after PacketSize (the 4.1.7 message
  with the 4.1.8 header, and generated ones), truncated, extended and mutated,
  through ``parse_packet`` and a ``FrameDecoder`` fed whole and byte by byte:
  parsed and rebuilt exactly, or refused with ``RemoteProtocolError``.
"""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import wire

from . import msmq_decoding as md
from . import msmq_samples as samples
from . import msmq_strategies as ms
from .test_invariant import check

EXAMPLES = settings(max_examples=300, deadline=None)
PINGS = [samples.frame("4.1.1-ping-request"), samples.frame("4.1.2-ping-response")]
#: The 4.1.8 SessionAck's SessionHeader: the 16 bytes after its InternalHeader.
EXAMPLE_SESSION_HEADER = samples.frame("4.1.8-session-ack")[20:]


def piggy_backed(data: bytes, header: bytes = EXAMPLE_SESSION_HEADER) -> bytes:
    """User packet ``data`` with BaseHeader SH set and ``header`` after PacketSize."""
    flags = int.from_bytes(data[2:4], "little") | int(wire.BaseFlags.SESSION)
    return data[:2] + flags.to_bytes(2, "little") + data[4:] + header


PIGGY_BACKED_SEEDS = [
    piggy_backed(samples.completed_user_message()),
    piggy_backed(wire.build_packet(samples.order_ack())),
    piggy_backed(wire.build_packet(samples.transactional_message())),
]


def check_ping(data: bytes) -> None:
    result = md.round_trip(wire.parse_ping, wire.build_ping, data)
    if isinstance(result, wire.RemoteProtocolError):
        assert result.field is not None
        assert result.field.startswith("Ping")


@st.composite
def mutated(draw: st.DrawFn, seeds: list[bytes]) -> bytes:
    """One of ``seeds``, damaged 1 to 3 times: cut, extended, a bit flipped, a byte,
    u16 or u32 overwritten."""
    data = bytearray(draw(st.sampled_from(seeds)))
    for _ in range(draw(st.integers(1, 3))):
        kind = draw(st.sampled_from(["cut", "extend", "flip", "u8", "u16", "u32"]))
        if kind == "cut":
            del data[draw(st.integers(0, len(data))) :]
        elif kind == "extend":
            data += draw(st.binary(min_size=1, max_size=24))
        elif data:
            width = {"flip": 1, "u8": 1, "u16": 2, "u32": 4}[kind]
            if len(data) < width:
                continue
            at = draw(st.integers(0, len(data) - width))
            if kind == "flip":
                data[at] ^= 1 << draw(st.integers(0, 7))
            else:
                value = draw(st.integers(0, (1 << (8 * width)) - 1))
                data[at : at + width] = value.to_bytes(width, "little")
    return bytes(data)


@pytest.mark.parametrize("data", PINGS)
def test_the_example_pings_round_trip(data: bytes) -> None:
    check_ping(data)
    assert wire.build_ping(wire.parse_ping(data)) == data


@EXAMPLES
@given(st.binary(max_size=64))
def test_random_datagrams_as_pings(data: bytes) -> None:
    check_ping(data)


@EXAMPLES
@given(mutated(PINGS))
def test_mutated_pings(data: bytes) -> None:
    check_ping(data)


@pytest.mark.parametrize("data", PIGGY_BACKED_SEEDS)
def test_the_piggy_backed_seeds_parse_and_carry_the_header(data: bytes) -> None:
    packet = wire.parse_packet(data)
    assert isinstance(packet, wire.UserMessage)
    assert packet.session == wire.SessionHeader(ack_sequence_number=1, window_size=64)
    check(data)


@EXAMPLES
@given(mutated(PIGGY_BACKED_SEEDS))
def test_mutated_piggy_backed_messages(data: bytes) -> None:
    check(data)


@settings(max_examples=150, deadline=None)
@given(ms.user_messages(), ms.session_headers, st.data())
def test_generated_piggy_backed_messages_mutated(
    message: wire.UserMessage, header: wire.SessionHeader, data: st.DataObject
) -> None:
    raw = wire.build_packet(dataclasses.replace(message, session=header))
    check(raw)
    check(data.draw(mutated([raw])))
