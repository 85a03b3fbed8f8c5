"""Feeding bytes to a ``wire.FrameDecoder`` the ways a socket can deliver them,
and to a parser that must rebuild what it parses.

Shared by the decoder and invariant tests and by the fuzz harness: the same
bytes split whole, one byte at a time or at given offsets, fed chunk by chunk,
with every packet the decoder completes collected on the way; and the round
trip (:func:`round_trip`) that every parse of any bytes owes: a value that
rebuilds to exactly those bytes, or a ``wire.RemoteProtocolError``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import TypeVar

import wire

T = TypeVar("T")


class NotRebuilt(AssertionError):
    """What a parser returned does not rebuild to the bytes it came from."""


def round_trip(
    parse: Callable[[bytes], T], build: Callable[[T], bytes], data: bytes
) -> T | wire.RemoteProtocolError:
    """``parse(data)``, or the ``wire.RemoteProtocolError`` it raised; any other
    exception goes through.

    Raises:
        NotRebuilt: what ``parse`` returned does not ``build`` to exactly ``data``.
    """
    try:
        value = parse(data)
    except wire.RemoteProtocolError as exc:
        return exc
    if build(value) != data:
        msg = f"{getattr(parse, '__name__', parse)} result does not rebuild to the same bytes"
        raise NotRebuilt(msg)
    return value


def bytewise(data: bytes) -> list[bytes]:
    """``data`` one byte at a time."""
    return [data[i : i + 1] for i in range(len(data))]


def split_at(data: bytes, cuts: Sequence[int]) -> list[bytes]:
    """``data`` cut at the sorted offsets ``cuts`` (empty chunks included)."""
    return [data[a:b] for a, b in zip([0, *cuts], [*cuts, len(data)], strict=True)]


def packets_from(decoder: wire.FrameDecoder, chunks: Iterable[bytes]) -> Iterator[wire.Packet]:
    """Give ``chunks`` to ``decoder`` one after the other, yielding each packet it completes."""
    for chunk in chunks:
        decoder.receive_data(chunk)
        yield from iter(decoder.next_packet, None)


def feed(decoder: wire.FrameDecoder, chunks: Iterable[bytes]) -> list[wire.Packet]:
    """Give ``chunks`` to ``decoder``; return the packets it completes."""
    return list(packets_from(decoder, chunks))


def decode(chunks: Iterable[bytes]) -> tuple[list[wire.Packet], wire.RemoteProtocolError | None]:
    """Feed ``chunks`` to a new decoder until they run out or it refuses them.

    Returns:
        The packets it completed, and the error that stopped it, or None.
    """
    packets: list[wire.Packet] = []
    try:
        for packet in packets_from(wire.FrameDecoder(), chunks):
            packets.append(packet)
    except wire.RemoteProtocolError as exc:
        return packets, exc
    return packets, None
