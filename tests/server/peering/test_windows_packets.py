"""Packets as a Windows queue manager sends them, through the peering adapter.

Two queue managers peer over the memory network (:mod:`peer_kit`, a mock
clock); the packets between them are rewritten in flight into what Windows
sends: a receiver that drops its window to 1 (pause, memory pressure) and
later grows it again, and a sender whose messages carry headers qmgr does not
use (a SecurityHeader with the user's SID, ExtensionData, a SoapHeader,
[MS-MQRR] trailers). The adapter must pace itself on the window and resume,
and take the messages without closing the session.
"""

from __future__ import annotations

import dataclasses
import itertools

import trio.testing
from peer_kit import Network, is_data

import wire

from .conftest import QUEUE, bodies, deliver, start_pair

#: The user's SID that Windows puts in every message's SecurityHeader (28 bytes).
SID = bytes.fromhex("010500000000000515000000ad4a9ebd36d9fa3d63a656dae8030000")


async def test_a_window_of_one_paces_the_sender_and_a_larger_one_resumes_it(
    network: Network, autojump_clock: trio.testing.MockClock
) -> None:
    a, b = await start_pair(network)
    events: list[str] = []
    paused = [4]  # the first SessionAcks that announce a window of 1

    def from_b(packet: wire.Packet, frame: bytes) -> bytes:
        if isinstance(packet, wire.ConnectionParameters):
            return wire.build_packet(dataclasses.replace(packet, window_size=1))
        if isinstance(packet, wire.SessionAck):
            events.append("ack")
            if paused[0]:
                paused[0] -= 1
                session = dataclasses.replace(packet.session, window_size=1)
                return wire.build_packet(dataclasses.replace(packet, session=session))
        return frame

    def from_a(packet: wire.Packet, frame: bytes) -> bytes:
        if is_data(packet):
            events.append("data")
        return frame

    network.channel(b, a).rewrite = from_b
    network.channel(a, b).rewrite = from_a
    expected = bodies(10)
    await a.send(b.remote(QUEUE), expected)
    await deliver(a, b, expected)

    # While the window is 1, one message goes per SessionAck; after the fifth
    # (window 64 again) the rest go without waiting for one.
    fifth = [i for i, event in enumerate(events) if event == "ack"][4]
    paced, resumed = events[:fifth], events[fifth:]
    assert paced.count("data") == 5
    assert all((first, second) != ("data", "data") for first, second in itertools.pairwise(paced))
    assert ("data", "data") in itertools.pairwise(resumed)
    assert a.closed == b.closed == []


async def test_headers_windows_adds_are_ignored_and_the_messages_stored(
    network: Network, autojump_clock: trio.testing.MockClock
) -> None:
    a, b = await start_pair(network)
    rewritten: list[wire.UserMessage] = []

    def as_windows_sends(packet: wire.Packet, frame: bytes) -> bytes:
        if not (isinstance(packet, wire.UserMessage) and is_data(packet)):
            return frame
        windows = dataclasses.replace(
            packet,
            security=wire.SecurityHeader(flags=0x0001, sender_id=SID),
            properties=dataclasses.replace(packet.properties, extension=b"\x01\x02\x03"),
            soap=wire.SoapHeader(header="<h:x/>", body="<b:y/>"),
            trailer=(12).to_bytes(4, "little") + bytes(8),
        )
        rewritten.append(windows)
        return wire.build_packet(windows)

    network.channel(a, b).rewrite = as_windows_sends
    expected = bodies(5)
    await a.send(b.remote(QUEUE), expected)
    await deliver(a, b, expected)
    assert len(rewritten) >= 5
    assert a.closed == b.closed == []
