"""Warnings a peer repeats, logged at a bounded rate.

Theory of operation
-------------------
A request the HTTP listener refuses for want of a right is logged
(``access_denied``, a warning), so that an operator sees who tries what. A
client that repeats such requests (pipelined, or over HTTP/2's streams) would
otherwise write a warning line for each, thousands a second from one
connection, and drown the daemon's other log lines (journald drops what
passes its rate limit). :class:`Repeats` decides, per peer address, which of
them to log: the first, then at most one every :data:`REPEAT_SECONDS`, which
says how many were passed over since the last one logged
(``passed_over``). It is driven by the caller's ``now`` and keeps at most
:data:`MAX_PEERS` addresses, the least recently seen forgotten first. The
refusals are all counted all the same (``qmgr_access_denied_total``).
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from typing import Final

__all__ = ["MAX_PEERS", "REPEAT_SECONDS", "Repeats"]

#: After a peer's first warning, at most one a this many seconds.
REPEAT_SECONDS: Final = 60.0
#: Peer addresses remembered at once.
MAX_PEERS: Final = 4096


@dataclass(slots=True)
class _Seen:
    logged_at: float
    passed_over: int = 0


class Repeats:
    """Which of a peer's repeated warnings to log (see the module docstring)."""

    def __init__(self, *, every: float = REPEAT_SECONDS, peers: int = MAX_PEERS) -> None:
        self.every = every
        self.peers = peers
        self._seen: OrderedDict[str, _Seen] = OrderedDict()

    def __len__(self) -> int:
        return len(self._seen)

    def take(self, peer: str, now: float) -> int | None:
        """None if the warning from ``peer`` is not to be logged now; else how many
        of its warnings were passed over since the last one logged (0: none)."""
        seen = self._seen.get(peer)
        if seen is None:
            self._seen[peer] = _Seen(now)
            if len(self._seen) > self.peers:
                self._seen.popitem(last=False)
            return 0
        self._seen.move_to_end(peer)
        if now - seen.logged_at < self.every:
            seen.passed_over += 1
            return None
        passed_over, seen.passed_over, seen.logged_at = seen.passed_over, 0, now
        return passed_over
