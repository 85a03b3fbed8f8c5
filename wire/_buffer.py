"""A receive buffer shared by the frame decoders.

Bytes arrive in arbitrary chunks; a decoder looks at a fixed-size header
first, decides how long the frame is (refusing sizes over its limit before
buffering them), and then takes exactly one whole frame. The buffer never
copies the unread tail on every read: it keeps an offset and compacts lazily.
"""

from __future__ import annotations


class ReceiveBuffer:
    """An append-only byte buffer with a read position."""

    __slots__ = ("_data", "_start")

    def __init__(self) -> None:
        self._data = bytearray()
        self._start = 0

    def __len__(self) -> int:
        return len(self._data) - self._start

    def append(self, data: bytes | bytearray | memoryview) -> None:
        """Add received bytes at the end."""
        if self._start and self._start >= len(self._data) // 2:
            del self._data[: self._start]
            self._start = 0
        self._data += data

    def peek(self, count: int) -> bytes | None:
        """Return the next ``count`` bytes without consuming them, or None if fewer are buffered."""
        if len(self) < count:
            return None
        return bytes(self._data[self._start : self._start + count])

    def take(self, count: int) -> bytes | None:
        """Consume and return exactly ``count`` bytes, or None (consuming nothing) if fewer."""
        if len(self) < count:
            return None
        end = self._start + count
        chunk = bytes(self._data[self._start : end])
        self._start = end
        if self._start == len(self._data):
            self._data.clear()
            self._start = 0
        return chunk
