"""Memory connections between queue managers' peering layers, with faults.

Each end of a connection is a :class:`FaultStream`; what flows from one node
to another passes through that direction's :class:`Channel`, which a test
sets: drop or rewrite packets, delay them, make the receiver read them a few
bytes at a time, stall the sender as a peer that stops reading does, or cut
the connection after so many bytes or inside a chosen packet; each channel
records what it delivered. The packet tests
(:func:`is_session_ack`, :func:`is_order_ack`, :func:`is_data`) say which
packets a channel's rules apply to. :mod:`peer_kit` builds its network of
nodes on them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import trio
import trio.testing

import wire

_BASE_HEADER = 16
_SESSION_HEADER = 16
_SIGNATURE = b"LIOR"


# ---------------------------------------------------------------------- packets


def is_session_ack(packet: wire.Packet) -> bool:
    """A stand-alone SessionAck."""
    return isinstance(packet, wire.SessionAck)


def is_order_ack(packet: wire.Packet) -> bool:
    """An OrderAck (a user packet to ``order_queue$``)."""
    return (
        isinstance(packet, wire.UserMessage)
        and wire.classify_packet(packet) is wire.PacketKind.ORDER_ACK
    )


def is_data(packet: wire.Packet) -> bool:
    """A user message that is neither an OrderAck nor a FinalAck."""
    return (
        isinstance(packet, wire.UserMessage)
        and wire.classify_packet(packet) is wire.PacketKind.USER_MESSAGE
    )


def _frame_length(header: bytes | bytearray) -> int | None:
    """The stream length of the packet whose BaseHeader starts ``header``, or
    None if it is not a BaseHeader (garbage is passed on unparsed)."""
    if bytes(header[4:8]) != _SIGNATURE:
        return None
    flags = int.from_bytes(header[2:4], "little")
    size = int.from_bytes(header[8:12], "little")
    if flags & wire.BaseFlags.INTERNAL:
        return size
    return size + (_SESSION_HEADER if flags & wire.BaseFlags.SESSION else 0)


# ---------------------------------------------------------------------- streams


@dataclass(eq=False)
class Channel:
    """What happens to the bytes one node sends another, on every connection between them.

    Attributes:
        drop: packets for which it returns True are not delivered. A dropped
            SessionAck is an acknowledgement lost; a dropped user packet breaks
            the session's counts, and the peer closes the session when it
            next compares them (a stream that lost bytes).
        rewrite: the bytes delivered instead of a packet's (called after ``drop``).
        delay: seconds each write waits before its bytes go on (the sender waits too).
        stall: while set to an unset event, writes wait for it and deliver
            nothing, as they block once a receiver that stopped reading has
            filled the socket's buffers (every connection between the two).
        read_sizes: the receiver reads at most these many bytes at a time, in
            turn (cycled); empty: whatever is there.
        cut_after: deliver this many more bytes, then cut the connection (the
            receiver sees the stream end, later writes are lost); once.
        cut_inside: called with each packet about to be delivered; a number
            ``n`` delivers the packet's first ``n`` bytes and cuts the
            connection there (None: deliver it whole).
        passed: every packet delivered (after any rewrite), in order.
        dropped: every packet dropped.
        cuts: connections cut.
    """

    drop: Callable[[wire.Packet], bool] | None = None
    rewrite: Callable[[wire.Packet, bytes], bytes] | None = None
    delay: float = 0.0
    stall: trio.Event | None = None
    read_sizes: Sequence[int] = ()
    cut_after: int | None = None
    cut_inside: Callable[[wire.Packet], int | None] | None = None
    passed: list[wire.Packet] = field(default_factory=list)
    dropped: list[wire.Packet] = field(default_factory=list)
    cuts: int = 0

    def count(self, predicate: Callable[[wire.Packet], bool]) -> int:
        """Packets delivered that match."""
        return sum(1 for packet in self.passed if predicate(packet))

    def user_packets(self, predicate: Callable[[wire.Packet], bool]) -> list[wire.UserMessage]:
        """User packets delivered that match, in order."""
        return [p for p in self.passed if isinstance(p, wire.UserMessage) and predicate(p)]


class _FakeSocket:
    """What ``PeerPort.serve`` asks of a socket: the peer's address."""

    def __init__(self, peer: tuple[str, int]) -> None:
        self._peer = peer

    def getpeername(self) -> tuple[str, int]:
        return self._peer


class FaultStream(trio.abc.Stream):
    """One end of a memory connection; what it sends goes through ``sending``,
    what it receives is read as ``receiving.read_sizes`` says."""

    def __init__(
        self,
        inner: trio.StapledStream[Any, Any],
        *,
        sending: Channel,
        receiving: Channel,
        peer: tuple[str, int],
    ) -> None:
        self.inner = inner
        self.sending = sending
        self.receiving = receiving
        self.socket = _FakeSocket(peer)
        self._pending = bytearray()
        self._raw = False  # garbage was sent: pass bytes on unparsed
        self._reads = 0
        self.cut = False

    def setsockopt(self, *args: object) -> None:
        """TCP_NODELAY and friends: nothing to do."""

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        if self.cut:
            return  # lost on the way
        channel = self.sending
        if self._raw:
            await self._forward(bytes(data))
            return
        self._pending += data
        out = bytearray()
        while len(self._pending) >= _BASE_HEADER:
            length = _frame_length(self._pending)
            if length is None or length < _BASE_HEADER:
                self._raw = True
                out += self._pending
                self._pending.clear()
                break
            if len(self._pending) < length:
                break
            frame = bytes(self._pending[:length])
            del self._pending[:length]
            try:
                packet = wire.parse_packet(frame)
            except wire.ProtocolError:
                out += frame
                continue
            if channel.drop is not None and channel.drop(packet):
                channel.dropped.append(packet)
                continue
            if channel.rewrite is not None:
                frame = channel.rewrite(packet, frame)
                packet = wire.parse_packet(frame)
            cut = None if channel.cut_inside is None else channel.cut_inside(packet)
            if cut is not None:
                out += frame[:cut]
                channel.cut_after = len(out)
                break
            channel.passed.append(packet)
            out += frame
        if out:
            await self._forward(bytes(out))

    async def inject(self, data: bytes) -> None:
        """Bytes to the peer, past every fault."""
        await self.inner.send_all(data)

    async def _forward(self, data: bytes) -> None:
        channel = self.sending
        if channel.delay:
            await trio.sleep(channel.delay)
        if channel.stall is not None:
            await channel.stall.wait()
        limit = channel.cut_after
        if limit is not None and len(data) >= limit:
            channel.cut_after = None
            channel.cuts += 1
            self.cut = True
            if limit:
                await self.inner.send_all(data[:limit])
            await self.inner.send_stream.aclose()
            return
        if limit is not None:
            channel.cut_after = limit - len(data)
        await self.inner.send_all(data)

    async def wait_send_all_might_not_block(self) -> None:
        await self.inner.wait_send_all_might_not_block()

    async def receive_some(self, max_bytes: int | None = None) -> bytes | bytearray:
        sizes = self.receiving.read_sizes
        if sizes:
            size = sizes[self._reads % len(sizes)]
            self._reads += 1
            max_bytes = size if max_bytes is None else min(size, max_bytes)
        return await self.inner.receive_some(max_bytes)

    async def aclose(self) -> None:
        await self.inner.aclose()
