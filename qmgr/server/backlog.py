"""Work that a background task takes all at once, waiting while there is none.

The peering adapter's forgetter (the outgoing entries acknowledged) and the
FinalAck courier's (the FinalAcks whose source has them) each keep such a
backlog: whoever finds work :meth:`Backlog.add` s it and goes on, and the
task :meth:`Backlog.take` s everything there is in one go, so that one write
covers what came in while the last one was being written.
"""

from __future__ import annotations

from typing import Generic, TypeVar

import trio

__all__ = ["Backlog"]

T = TypeVar("T")


class Backlog(Generic[T]):
    """Items waiting for one background task, in the order they came."""

    def __init__(self) -> None:
        self._items: list[T] = []
        self._wake = trio.Event()

    def __contains__(self, item: object) -> bool:
        return item in self._items

    def __len__(self) -> int:
        return len(self._items)

    def add(self, *items: T) -> None:
        """More work (none: just wake the task)."""
        self._items.extend(items)
        self._wake.set()

    async def take(self) -> list[T]:
        """Every item waiting, once there is one (no checkpoint if there is one now)."""
        while not self._items:
            self._wake = trio.Event()
            await self._wake.wait()
        items, self._items = self._items, []
        return items
