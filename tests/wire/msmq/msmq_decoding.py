"""Feeding bytes to a ``wire.FrameDecoder`` the ways a socket can deliver them.

Shared by the decoder and invariant tests and by the fuzz harness: the same
bytes split whole, one byte at a time or at given offsets, fed chunk by chunk,
with every packet the decoder completes collected on the way.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence

import wire


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
