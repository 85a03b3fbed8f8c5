"""Warnings a client repeats, logged at a bounded rate.

Theory of operation
-------------------
A request the HTTP listener refuses for want of a right is logged
(``access_denied``, a warning), so that an operator sees who tries what. A
client that repeats such requests (pipelined, or over HTTP/2's streams) would
otherwise write a warning line for each, thousands a second from one
connection, and drown the daemon's other log lines (journald drops what
passes its rate limit). :class:`Repeats` decides, per kind (the caller says
what makes one: for the HTTP listener's app, a peer address, a principal
and a request or route, a number the routes bound), which of them to log:
the first, then at most one every :data:`REPEAT_SECONDS`, which says how
many were passed over since the last one logged (``passed_over``). It is
driven by the caller's ``now`` and keeps at most :data:`MAX_KINDS` kinds,
the least recently seen forgotten first. The refusals are all counted all
the same (``qmgr_access_denied_total``).
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from typing import Final

__all__ = ["MAX_KINDS", "REPEAT_SECONDS", "Repeats"]

#: After the first warning of a kind, at most one of it in this many seconds.
REPEAT_SECONDS: Final = 60.0
#: Kinds remembered at once.
MAX_KINDS: Final = 4096


@dataclass(slots=True)
class _Seen:
    logged_at: float
    passed_over: int = 0


class Repeats:
    """Which of the warnings a client repeats to log (see the module docstring)."""

    def __init__(self, *, every: float = REPEAT_SECONDS, kinds: int = MAX_KINDS) -> None:
        self.every = every
        self.kinds = kinds
        self._seen: OrderedDict[str, _Seen] = OrderedDict()

    def __len__(self) -> int:
        return len(self._seen)

    def take(self, kind: str, now: float) -> int | None:
        """None if the warning of kind ``kind`` is not to be logged now; else how
        many of its kind were passed over since the last one logged (0: none)."""
        seen = self._seen.get(kind)
        if seen is None:
            self._seen[kind] = _Seen(now)
            if len(self._seen) > self.kinds:
                self._seen.popitem(last=False)
            return 0
        self._seen.move_to_end(kind)
        if now - seen.logged_at < self.every:
            seen.passed_over += 1
            return None
        passed_over, seen.passed_over, seen.logged_at = seen.passed_over, 0, now
        return passed_over
