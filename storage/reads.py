"""Reading committed messages.

Theory of operation
-------------------
Every read opens a read transaction, copies what it found out of the map
and closes the transaction before it returns, so no transaction outlives a
call (which is what lets the owner resize the map between calls). Reads see
the last committed write: a message becomes readable when the write that
appends it commits, whatever thread made it.

Messages below a queue's ``purged_below`` mark are invisible at once, even
while they still wait in the file to be erased.

Receives call :meth:`MessageReader.first_fifo` or
:meth:`MessageReader.first_by_priority` with a *start position* and the set
of lookup ids to skip (those held by open transactions). The caller keeps
the start position just past the messages it knows are all held, so a
receive costs a seek plus the keys it really has to look at, not a walk
over every held message at the head of the queue.

:meth:`MessageReader.range_end` and :meth:`MessageReader.read_through`
measure and list a range of a queue by its keys alone (no message is
read): how far ``limit`` visible messages after a lookup id reach, and
which lookup ids lie at or below one (and after another). Without a limit,
``range_end`` finds the last visible message by seeking back from the
queue's end, and counts either the keys up to it or, when fewer keys lie
before the range, the queue's depth less those keys and the held messages.

The reads of the other concerns sit with them (``ops.peering``,
``ops.prepared``, ``ops.poison``, ...); :class:`~storage.store.Store` puts
them together.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Container, Iterable, Iterator, Sequence
from typing import Final

import lmdb

from .catalog import Catalog
from .environment import Environment, keys_between
from .errors import StoreCorrupt
from .keys import (
    MAX_LOOKUP_ID,
    counters_key,
    lookup_id_of,
    message_key,
    message_range,
    priority_band_key,
    priority_range,
    split_priority_key,
)
from .records import decode_counters, message_arrived_time

__all__ = ["MessageReader", "read_erasable", "scan_messages"]

#: Bands of the priority index: band 0 holds priority 7, band 7 priority 0.
PRIORITY_BANDS: Final = 8


class MessageReader:
    """Reads committed messages as raw records (``records`` decodes their header)."""

    def __init__(self, env: Environment, catalog: Catalog) -> None:
        self._env = env
        self._catalog = catalog

    def _floor(self, queue_id: int) -> int:
        queue = self._catalog.by_id.get(queue_id)
        # A deleted queue's messages are invisible at once, like purged ones.
        return MAX_LOOKUP_ID if queue is None else max(queue.purged_below, 1)

    def read_message(self, queue_id: int, lookup_id: int, *, purged: bool = False) -> bytes | None:
        """One committed message's record, or ``None`` if it is not there (or
        purged, unless ``purged``: a purged message a transaction still holds)."""
        # MAX_LOOKUP_ID is never a message: it keys the queue's counters.
        floor = 1 if purged else self._floor(queue_id)
        if lookup_id < floor or lookup_id >= MAX_LOOKUP_ID:
            return None
        with self._env.read("read_message") as txn:
            data: bytes | None = txn.get(
                message_key(queue_id, lookup_id), db=self._catalog.dbs.messages
            )
        return data

    def oldest_arrivals(self, queue_ids: Iterable[int]) -> dict[int, float]:
        """When the first visible message of each queue became visible (unix
        seconds), by queue id; queues without one are left out. One read
        transaction, one cursor seek per queue, and only the 8 bytes of the
        arrival time are read of each record (pass the ids in order: the seeks
        then move forward through the file)."""
        found: dict[int, float] = {}
        by_id = self._catalog.by_id
        with (
            self._env.read("oldest_arrivals", buffers=True) as txn,
            txn.cursor(db=self._catalog.dbs.messages) as cursor,
        ):
            for queue_id in queue_ids:
                queue = by_id.get(queue_id)
                if queue is None or not queue.depth:
                    continue
                start = message_key(queue_id, max(queue.purged_below, 1))
                if cursor.set_range(start) and bytes(cursor.key()) < counters_key(queue_id):
                    found[queue_id] = message_arrived_time(cursor.value())
        return found

    def read_range(
        self,
        queue_id: int,
        *,
        after: int = 0,
        limit: int = 1000,
        skip: Container[int] = (),
        max_bytes: int | None = None,
    ) -> list[tuple[int, bytes]]:
        """Committed messages with ``lookup_id > after``, in lookup id order, leaving
        out the ids in ``skip``; at most ``limit`` of them, and no more once their
        records reach ``max_bytes`` (always one, if there is one).

        Skipped messages are passed over by key; their values are not copied.
        """
        if limit <= 0 or after >= MAX_LOOKUP_ID:
            return []
        start = message_key(queue_id, max(after + 1, self._floor(queue_id)))
        end = message_range(queue_id)[1]
        found: list[tuple[int, bytes]] = []
        with (
            self._env.read("read_range") as txn,
            txn.cursor(db=self._catalog.dbs.messages) as cursor,
        ):
            if cursor.set_range(start):
                size = 0
                for lookup_id in _lookup_ids(cursor, end, skip):
                    value: bytes = cursor.value()
                    found.append((lookup_id, value))
                    size += len(value)
                    if len(found) >= limit or (max_bytes is not None and size >= max_bytes):
                        break
        return found

    def range_end(
        self, queue_id: int, *, after: int, limit: int, skip: Container[int]
    ) -> tuple[int, int]:
        """``(count, last)`` of the visible messages (not purged, not in ``skip``)
        with ``lookup_id > after``, counting at most ``limit`` of them (0: all).

        ``last`` is the lookup id of the last one counted, or ``after`` if
        there is none. Only keys are read.

        Raises:
            ValueError: ``limit`` is negative.
        """
        if limit < 0:
            msg = f"limit must not be negative, not {limit}"
            raise ValueError(msg)
        record = self._catalog.by_id.get(queue_id)
        if record is None or after >= MAX_LOOKUP_ID - 1:
            return 0, after
        db = self._catalog.dbs.messages
        with self._env.read("range_end") as txn, txn.cursor(db=db) as cursor:
            counters = txn.get(counters_key(queue_id), db=db)
            if counters is None:
                return 0, after
            record = decode_counters(record, counters)
            floor = max(record.purged_below, 1)
            first = max(after + 1, floor)
            if limit:
                count, last = _count_keys(cursor, queue_id, first, MAX_LOOKUP_ID, skip, limit)
                return count, last or after
            found = _last_visible(cursor, queue_id, first, skip)
            if found is None:
                return 0, after
            if found - first <= first - floor or not isinstance(skip, Collection):
                return _count_keys(cursor, queue_id, first, found + 1, skip, 0)[0], found
            below = _count_keys(cursor, queue_id, floor, first, (), 0)[0]
            held = sum(
                1
                for lookup_id in skip
                if isinstance(lookup_id, int)
                and first <= lookup_id < MAX_LOOKUP_ID
                and cursor.set_key(message_key(queue_id, lookup_id))
            )
            return record.depth - below - held, found

    def read_through(
        self, queue_id: int, *, through: int, limit: int, skip: Container[int], after: int = 0
    ) -> list[int]:
        """Lookup ids of the visible messages (not purged, not in ``skip``) with
        ``after < lookup_id <= through``, ascending, at most ``limit`` of them.
        Only keys are read."""
        floor = max(self._floor(queue_id), after + 1)
        if limit <= 0 or through < floor or floor >= MAX_LOOKUP_ID:
            return []
        end = min(through, MAX_LOOKUP_ID - 1) + 1
        found: list[int] = []
        db = self._catalog.dbs.messages
        with self._env.read("read_through") as txn, txn.cursor(db=db) as cursor:
            if cursor.set_range(message_key(queue_id, floor)):
                for lookup_id in _lookup_ids(cursor, message_key(queue_id, end), skip):
                    found.append(lookup_id)
                    if len(found) >= limit:
                        break
        return found

    def first_fifo(
        self, queue_id: int, *, start: int, skip: Container[int]
    ) -> tuple[int, bytes] | None:
        """The first message with a lookup id at or above ``start`` that is not in ``skip``."""
        found = self.read_range(queue_id, after=start - 1, limit=1, skip=skip)
        return found[0] if found else None

    def first_by_priority(
        self, queue_id: int, *, start: tuple[int, int], skip: Container[int]
    ) -> tuple[int, int, bytes] | None:
        """The first message in priority order at or after ``start`` and not in ``skip``.

        Positions are ``(band, lookup_id)`` with band ``7 - priority``, so the
        highest priority comes first and, within a priority, the oldest.

        Returns:
            ``(band, lookup_id, record)``, or ``None``.

        Raises:
            StoreCorrupt: the priority index names a message that is missing.
        """
        floor = self._floor(queue_id)
        band, first = start
        first = max(first, floor)
        end = priority_range(queue_id)[1]
        dbs = self._catalog.dbs
        with self._env.read("first_available") as txn, txn.cursor(db=dbs.by_priority) as cursor:
            positioned = cursor.set_range(priority_band_key(queue_id, band, first))
            while positioned:
                key = cursor.key()
                if key >= end:
                    return None
                _, key_band, lookup_id = split_priority_key(key)
                if lookup_id < floor:
                    # A purged entry at the start of a band: jump past the mark.
                    positioned = cursor.set_range(priority_band_key(queue_id, key_band, floor))
                    continue
                if lookup_id not in skip:
                    data = txn.get(message_key(queue_id, lookup_id), db=dbs.messages)
                    if data is None:
                        msg = (
                            f"priority index names message {lookup_id} of queue "
                            f"{queue_id}, which is missing"
                        )
                        raise StoreCorrupt(msg)
                    return key_band, lookup_id, data
                positioned = cursor.next()
        return None


def read_erasable(
    env: Environment,
    catalog: Catalog,
    queue_id: int,
    *,
    limit: int,
    keep: Container[int],
    below: int | None,
    select: Callable[[memoryview], bool],
) -> tuple[int, int, list[tuple[int, bytes]]]:
    """What an ``EraseStep(queue_id, limit, keep, below)`` planned now would
    erase: ``(count, last, selected)``, the number of messages, the lookup id
    of the last one (0 if none), and a copy of each record ``select`` picks.
    ``select`` sees each record as a view into the map, so records it passes
    over are never copied."""
    doomed = catalog.doomed.get(queue_id)
    record = doomed or catalog.by_id.get(queue_id)
    if record is None or limit <= 0:
        return 0, 0, []
    mark = MAX_LOOKUP_ID if doomed is not None else record.purged_below
    if below is not None:
        mark = min(mark, below)
    start, end = message_range(queue_id)
    end = min(end, message_key(queue_id, mark))
    count = last = 0
    selected: list[tuple[int, bytes]] = []
    with (
        env.read("read_erasable", buffers=True) as txn,
        txn.cursor(db=catalog.dbs.messages) as cursor,
    ):
        for key in keys_between(cursor, start, end):
            lookup_id = lookup_id_of(key)
            if lookup_id not in keep:
                count += 1
                last = lookup_id
                value = cursor.value()
                if select(value):
                    selected.append((lookup_id, bytes(value)))
                if count >= limit:
                    break
    return count, last, selected


def scan_messages(
    env: Environment,
    catalog: Catalog,
    queues: Sequence[tuple[int, int]],
    *,
    select: Callable[[memoryview], bool],
    limit: int,
    visits: int,
) -> tuple[list[tuple[int, int, bytes]], list[tuple[int, int]]]:
    """The stored messages of ``queues`` (``(queue_id, first lookup id)`` pairs:
    messages below the first are passed over) that ``select`` picks, as
    ``(queue_id, lookup_id, record)``, at most ``limit``, looking at no more
    than ``visits`` records. Returns them and what is left to scan (the same
    kind of pairs; empty when done). ``select`` sees each record as a view
    into the map; only picked records are copied. This reads whole queues, for
    rare requests (``qmgr trace``): call it again with what is left, in steps."""
    found: list[tuple[int, int, bytes]] = []
    left = list(queues)
    seen = 0
    with (
        env.read("scan_messages", buffers=True) as txn,
        txn.cursor(db=catalog.dbs.messages) as cursor,
    ):
        while left:
            queue_id, first = left[0]
            end = message_range(queue_id)[1]
            for key in keys_between(cursor, message_key(queue_id, max(first, 1)), end):
                lookup_id = lookup_id_of(key)
                if seen >= visits or len(found) >= limit:
                    left[0] = (queue_id, lookup_id)
                    return found, left
                seen += 1
                value = cursor.value()
                if select(value):
                    found.append((queue_id, lookup_id, bytes(value)))
            left.pop(0)
    return found, left


def _count_keys(
    cursor: lmdb.Cursor[bytes],
    queue_id: int,
    first: int,
    end: int,
    skip: Container[int],
    limit: int,
) -> tuple[int, int]:
    """``(count, last)`` of the message keys in ``[first, end)`` not in ``skip``,
    counting at most ``limit`` (0: all); ``last`` is 0 if none."""
    count = last = 0
    end_key = message_key(queue_id, end) if end < MAX_LOOKUP_ID else message_range(queue_id)[1]
    if first >= end or not cursor.set_range(message_key(queue_id, first)):
        return 0, 0
    for lookup_id in _lookup_ids(cursor, end_key, skip):
        count += 1
        last = lookup_id
        if count == limit:
            break
    return count, last


def _last_visible(
    cursor: lmdb.Cursor[bytes], queue_id: int, first: int, skip: Container[int]
) -> int | None:
    """The highest lookup id at or above ``first`` not in ``skip``, seeking back
    from the queue's end (its counters key), or ``None``."""
    first_key = message_key(queue_id, first)
    positioned = cursor.prev() if cursor.set_range(counters_key(queue_id)) else cursor.last()
    while positioned:
        key = cursor.key()
        if key < first_key:
            return None
        lookup_id = lookup_id_of(key)
        if lookup_id not in skip:
            return lookup_id
        positioned = cursor.prev()
    return None


def _lookup_ids(cursor: lmdb.Cursor[bytes], end: bytes, skip: Container[int]) -> Iterator[int]:
    """The lookup ids of the message keys from the cursor's position to ``end``
    (excluded), leaving out those in ``skip``. The cursor stays on each key
    while its id is handled (so ``cursor.value()`` is that message's)."""
    for key in cursor.iternext(keys=True, values=False):
        if key >= end:
            return
        lookup_id = lookup_id_of(key)
        if lookup_id not in skip:
            yield lookup_id
