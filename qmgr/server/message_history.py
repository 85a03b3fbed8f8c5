"""Ids of non-transactional messages received lately, to drop resent duplicates.

A recoverable message that arrived and was stored, but whose SessionAck was
lost with its connection, is sent again on the next one. Transactional
messages are filtered by their exactly-once sequence; the others by this
history of (source QM, message id), bounded by ``peers.history_size``
entries and ``peers.history_seconds`` (MSMQ's MessageIDHistoryTable, 10,000
entries and 30 minutes by default). The store keeps the same entries
(``storage.RememberMessageIds``), so a restart forgets nothing; what the
history evicts, the store forgets in the same write.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable

__all__ = ["MessageHistory"]


class MessageHistory:
    """Ids of non-transactional messages received lately, to drop resent duplicates.

    Bounded by count and age; what it forgets, the store forgets too.
    """

    def __init__(self, keys: Iterable[bytes], *, size: int, seconds: float, now: float) -> None:
        self._size = size
        self._seconds = seconds
        self._seen: OrderedDict[bytes, float] = OrderedDict((key, now) for key in keys)
        self._pending: set[bytes] = set()

    def __contains__(self, key: bytes) -> bool:
        return key in self._seen or key in self._pending

    def __len__(self) -> int:
        return len(self._seen)

    def add_pending(self, key: bytes) -> None:
        """A message with this id is being stored."""
        self._pending.add(key)

    def evictions(self, now: float, adding: int = 1) -> tuple[bytes, ...]:
        """Keys to forget so that ``adding`` more fit (too many, or too old)."""
        out: list[bytes] = []
        seen = self._seen
        excess = len(seen) + adding - self._size
        for key, when in seen.items():
            if excess > 0 or now - when > self._seconds:
                out.append(key)
                excess -= 1
            else:
                break
        for key in out:
            del seen[key]
        return tuple(out)

    def stored(self, key: bytes, now: float) -> None:
        """The message and its id are durable."""
        self._pending.discard(key)
        self._seen[key] = now

    def failed(self, key: bytes) -> None:
        """Storing it failed: a resend is not a duplicate."""
        self._pending.discard(key)
