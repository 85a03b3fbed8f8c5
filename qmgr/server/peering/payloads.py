"""The payloads of an outgoing queue's loaded entries, kept within a byte budget.

Theory of operation
-------------------
An outgoing queue loads its entries ahead of sending them (``FILL_LOW``
waiting, and up to ``MAX_LOADED`` with those sent and not yet acknowledged:
``outgoing_queue``). A count of entries is no bound on memory: 512 waiting
messages of 4 MiB are 2 GiB, for each destination that is down, and again
at every start. So an entry's payload is kept in memory only while the
queue's kept payloads stay within :data:`PAYLOAD_BUDGET` bytes; past it the
entry is loaded without its payload, which is read from the store each time
it is needed: to build its packet (at each send and resend) and to write the
reports of its delivery or its end. The store keeps every entry until it is
forgotten, so a read finds it, unless a purge or a forget took it
meanwhile (``None``: there is nothing left to send or report).

For an entry loaded without its payload, :class:`LoadedPayloads` remembers
whether its delivery is reported (``reports``), so that forgetting entries
that report nothing reads nothing.

A queue of small messages (a few hundred bytes) keeps every loaded payload,
and sends without reading the store again; a queue of large messages holds
about :data:`PAYLOAD_BUDGET` bytes, whatever waits behind them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Final

__all__ = ["PAYLOAD_BUDGET", "LoadedPayloads", "Payload"]

#: Bytes of payloads one outgoing queue keeps in memory.
PAYLOAD_BUDGET: Final = 1 << 20

#: An entry's payload, as the store gives it.
Payload = memoryview | bytes


class LoadedPayloads:
    """The loaded entries of one outgoing queue by lookup id, each with its
    payload while they fit in ``budget`` bytes (see the module docstring)."""

    def __init__(self, budget: int = PAYLOAD_BUDGET) -> None:
        self._budget = budget
        # Each loaded entry's payload, or None where it was left in the store.
        self._payloads: dict[int, Payload | None] = {}
        # Entries left in the store whose delivery is reported.
        self._reporting: set[int] = set()
        #: Bytes of the payloads kept.
        self.kept_bytes = 0

    def add(self, lookup_id: int, payload: Payload, *, reports: bool) -> None:
        """Load an entry: its payload kept if it fits in the budget, else left in
        the store (``reports``: its delivery writes a report)."""
        size = len(payload)
        if self.kept_bytes + size <= self._budget:
            self._payloads[lookup_id] = payload
            self.kept_bytes += size
            return
        self._payloads[lookup_id] = None
        if reports:
            self._reporting.add(lookup_id)

    def get(self, lookup_id: int, read: Callable[[int], Payload | None]) -> Payload | None:
        """The payload of a loaded entry, read with ``read`` where it was left in
        the store; None if the entry is not loaded, or gone from the store."""
        if lookup_id not in self._payloads:
            return None
        payload = self._payloads[lookup_id]
        return payload if payload is not None else read(lookup_id)

    def reporting(self, lookup_id: int, read: Callable[[int], Payload | None]) -> Payload | None:
        """The payload of a loaded entry whose delivery may be reported: as
        :meth:`get`, but None without a read for an entry left in the store
        that reports nothing."""
        if self._payloads.get(lookup_id) is None and lookup_id not in self._reporting:
            return None
        return self.get(lookup_id, read)

    def discard(self, lookup_id: int) -> None:
        """Unload an entry (forgotten or purged); nothing if it is not loaded."""
        payload = self._payloads.pop(lookup_id, None)
        if payload is not None:
            self.kept_bytes -= len(payload)
        self._reporting.discard(lookup_id)

    def __contains__(self, lookup_id: object) -> bool:
        return lookup_id in self._payloads

    def __len__(self) -> int:
        return len(self._payloads)

    def __iter__(self) -> Iterator[int]:
        return iter(self._payloads)
