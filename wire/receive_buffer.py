"""A receive buffer shared by the frame decoders.

Bytes arrive in arbitrary chunks; a decoder looks at a fixed-size header
first, decides how long the frame is (refusing sizes over its limit before
buffering them), and then takes exactly one whole frame.

Most reads hold whole frames, so the buffer reads them in place from the
chunk received, without copying the unread rest. Only when a frame spans
reads are the chunks joined, once, when enough has arrived for it: a large
frame arriving in many reads costs one join, not one copy per read.
"""

from __future__ import annotations


class ReceiveBuffer:
    """An append-only byte buffer with a read position."""

    __slots__ = ("_chunked", "_chunks", "_data", "_pos")

    def __init__(self) -> None:
        self._data = b""
        self._pos = 0
        # Chunks received after ``_data`` and not joined to it yet.
        self._chunks: list[bytes] = []
        self._chunked = 0

    def __len__(self) -> int:
        return len(self._data) - self._pos + self._chunked

    def append(self, data: bytes | bytearray | memoryview) -> None:
        """Add received bytes at the end."""
        chunk = data if type(data) is bytes else bytes(data)
        if self._pos >= len(self._data) and not self._chunks:
            self._data = chunk
            self._pos = 0
        elif chunk:
            self._chunks.append(chunk)
            self._chunked += len(chunk)

    def _contiguous(self, count: int) -> bool:
        """Make at least ``count`` unread bytes contiguous in ``_data`` if they have arrived."""
        if len(self._data) - self._pos >= count:
            return True
        if len(self._data) - self._pos + self._chunked < count:
            return False
        self._data = b"".join((self._data[self._pos :], *self._chunks))
        self._pos = 0
        self._chunks = []
        self._chunked = 0
        return True

    def peek(self, count: int) -> bytes | None:
        """Return the next ``count`` bytes without consuming them, or None if fewer are buffered."""
        if not self._contiguous(count):
            return None
        return self._data[self._pos : self._pos + count]

    def take(self, count: int) -> bytes | None:
        """Consume and return exactly ``count`` bytes, or None (consuming nothing) if fewer."""
        if not self._contiguous(count):
            return None
        start = self._pos
        end = start + count
        self._pos = end
        data = self._data
        if start == 0 and end == len(data):
            return data
        return data[start:end]

    def view(self) -> tuple[bytes, int, int]:
        """The contiguous unread bytes: ``(data, start, end)`` (read, do not keep ``data``)."""
        return self._data, self._pos, len(self._data)

    def skip(self, count: int) -> None:
        """Consume ``count`` bytes that :meth:`view` showed."""
        self._pos += count
