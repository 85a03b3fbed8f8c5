"""A sans-IO frame decoder for the MSMQ session stream (TCP port 1801).

Theory of operation
-------------------
The caller feeds whatever bytes arrive with :meth:`FrameDecoder.receive_data`
and then calls :meth:`FrameDecoder.next_packet` until it returns None ("need
more data"). The decoder has two states, implicit in the buffer:

* fewer than 16 bytes buffered: wait;
* a BaseHeader is buffered: :func:`frame_length` checks version, signature and
  PacketSize *before* anything more is waited for, so an oversized or
  impossible declaration is refused while at most one chunk of it is held;
  then wait until the whole packet is buffered, take exactly those bytes and
  hand them to :func:`parse_packet`.

Framing follows the SessionHeader length rule of :mod:`wire.msmq.parse`: an
internal packet is PacketSize bytes; a user packet with SH set is PacketSize
plus the 16-byte SessionHeader that follows it.

Errors are final. Once :meth:`next_packet` has raised, the stream cannot be
resynchronised (MQQB says: discard the packet and close the session, §3.1.5.1.2
and §3.1.5.1.3), so every later call raises the same error again.
"""

from __future__ import annotations

from ..protocol_errors import RemoteProtocolError
from ..receive_buffer import ReceiveBuffer
from .constants import BASE_HEADER_SIZE, MAX_PACKET_SIZE
from .packets import Packet
from .parse import frame_length, parse_packet


class FrameDecoder:
    """Turns a byte stream from a peer queue manager into packet values.

    Args:
        max_packet_size: the largest PacketSize accepted; the protocol's
            0x400000 by default. A smaller limit refuses larger packets early.
    """

    __slots__ = ("_buffer", "_error", "_length", "_max_packet_size")

    def __init__(self, *, max_packet_size: int = MAX_PACKET_SIZE) -> None:
        if not BASE_HEADER_SIZE <= max_packet_size <= MAX_PACKET_SIZE:
            msg = f"max_packet_size must be in 16..{MAX_PACKET_SIZE:#x}, got {max_packet_size}"
            raise ValueError(msg)
        self._buffer = ReceiveBuffer()
        self._max_packet_size = max_packet_size
        self._length: int | None = None  # the current packet's length, once its header is read
        self._error: RemoteProtocolError | None = None

    @property
    def buffered(self) -> int:
        """How many received bytes are not yet part of a returned packet.

        Non-zero when the peer closes the connection means it stopped mid-packet.
        """
        return len(self._buffer)

    def receive_data(self, data: bytes) -> None:
        """Add bytes received from the peer. Never raises and never parses."""
        self._buffer.append(data)

    def next_packet(self) -> Packet | None:
        """Return the next whole packet, or None if more bytes are needed.

        Returns:
            A packet value, or None: call :meth:`receive_data` and try again.

        Raises:
            RemoteProtocolError: the peer sent malformed bytes. The session must
                be closed; the decoder raises the same error on every later call.
        """
        if self._error is not None:
            raise self._error
        try:
            length = self._length
            if length is None:
                header = self._buffer.peek(BASE_HEADER_SIZE)
                if header is None:
                    return None
                length = self._length = frame_length(header, self._max_packet_size)
            data = self._buffer.take(length)
            if data is None:
                return None
            self._length = None
            return parse_packet(data)
        except RemoteProtocolError as exc:
            self._error = exc
            raise
