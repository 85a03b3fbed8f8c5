"""Ids of non-transactional messages received lately, to drop resent duplicates.

Theory of operation
-------------------
A recoverable message that arrived and was stored, but whose SessionAck was
lost with its connection, is sent again on the next one. Transactional
messages are filtered by their exactly-once sequence
(:mod:`qmgr.protocol.incoming`); the others by this history of message keys
(MSMQ's MessageIDHistoryTable), bounded by ``size`` entries and ``seconds``
of age (``peers.history_size`` and ``peers.history_seconds``: 10,000 entries
and 30 minutes by default).

A key names one copy of a message: its source QM GUID, its message ordinal
and a CRC-32 of its destination queue's key in lower case (one message id
may reach several queues here: a multiple-element name, a distribution list,
and each copy is its own). The *bare* key (source and ordinal only) is a key
written before destinations were part of it, and counts too
(:func:`message_keys`).

A key is *pending* from the moment the receiver accepts its message until
the write that stores the message (and the key, ``storage.RememberMessageIds``)
is persisted; then it is *seen*, with the wall time of that moment. Both
count as known: a resend that arrives while the first copy is still on its
way to the disk is a duplicate. A write that fails releases its pending keys
(:meth:`MessageHistory.failed`): the resend of a message never stored is not
a duplicate. The store keeps the seen keys, so a restart forgets nothing;
what the history evicts (too many, or too old), the store forgets in the
same write that remembers the next key (:meth:`MessageHistory.evictions`).
"""

from __future__ import annotations

import zlib
from collections import OrderedDict
from collections.abc import Iterable
from typing import Final

__all__ = ["MessageHistory", "message_keys"]

_U32_MAX: Final = 0xFFFFFFFF


def message_keys(source_qm: bytes, message_id: int, destination: str) -> tuple[bytes, bytes]:
    """The history key of one copy of a message, and its bare key.

    Args:
        source_qm: the source queue manager's GUID, 16 bytes.
        message_id: the message's ordinal (its low 32 bits count).
        destination: the key of the queue it is for (any case).
    """
    bare = source_qm + (message_id & _U32_MAX).to_bytes(4, "big")
    return bare + zlib.crc32(destination.lower().encode()).to_bytes(4, "big"), bare


class MessageHistory:
    """Keys of non-transactional messages received lately (see the module docstring).

    Args:
        keys: the keys the store holds (seen at ``now``).
        size: the most keys seen.
        seconds: the longest a key is seen.
        now: wall time, in seconds.
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

    @property
    def pending(self) -> int:
        """Keys of messages accepted and not yet persisted."""
        return len(self._pending)

    def add_pending(self, key: bytes) -> None:
        """A message with this key is being stored."""
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

    def persisted(self, key: bytes, now: float) -> None:
        """The message and its key are durable."""
        self._pending.discard(key)
        self._seen[key] = now

    def failed(self, key: bytes) -> None:
        """Storing it failed: a resend is not a duplicate."""
        self._pending.discard(key)
