"""Streaming reads: micro-batches of a queue by LookupId, on one queue manager or several.

Theory of operation
-------------------
A micro-batch is a LookupId range ``(start, end]`` of the queue on each
queue manager read (``_read``): on the one of ``endpoint``, or on every one
of ``endpoints``, each with LookupIds of its own. The driver measures where
the next micro-batch ends on each (at most ``maxMessagesPerTrigger``
messages after its start, per queue manager), plans the ranges in
``partitions`` tasks per queue manager, and once Spark has committed a
micro-batch removes its messages with ``remove_through`` (idempotent; the
journal gets its copies), on a thread per queue manager (:class:`Remover`)
so that the next micro-batch does not wait for it. Spark commits a source
one micro-batch late, after the next batch's offsets are in its
write-ahead log, so a batch that is replayed after a crash still finds
every one of its messages, on every queue manager. Spark asks for the end
of the next micro-batch (``latestOffset(start)``, Spark 4.2 and later) only
once the micro-batch that ended at ``start`` is in its commit log, and a
restarted query replays an uncommitted micro-batch without asking: so
``latestOffset`` removes through ``start`` as well, and the last
micro-batch's messages leave the queue at the next trigger instead of
waiting for more to come.

Offsets (the JSON Spark keeps in the checkpoint) are, with ``endpoint``,
``{"queue_id": Q, "lookup_id": L}``; with ``endpoints``, one entry per
queue manager, keyed by its GUID (an address may change hands, a GUID
does not): ``{"GUID": {"endpoint": "HOST:PORT", "queue_id": Q,
"lookup_id": L}, ...}``. A queue manager added to ``endpoints`` is read
from its queue's beginning; one that a checkpoint names and ``endpoints``
no longer reaches stops the query (the messages of its last micro-batch
would otherwise stay, and be read again if it came back).

The queue id in the offsets catches a queue that was deleted and created
again under the same name: its LookupIds start afresh, so the offsets of a
checkpoint mean nothing there, and the query stops with a clear error.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple, TypeVar

from pyspark.sql.datasource import DataSourceStreamReader, InputPartition

try:
    from pyspark.sql.streaming.datasource import SupportsTriggerAvailableNow
except ImportError:  # pragma: no cover - Spark 4.0 and 4.1

    class SupportsTriggerAvailableNow:  # type: ignore[no-redef]
        """Before Spark 4.2, Python sources do not take part in Trigger.AvailableNow."""


from ._arrow import COLUMNS
from ._options import DataSourceError, Options
from ._read import LookupRange, check_queue_id, in_parallel, measure, on_each, read_range

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql.streaming.datasource import ReadLimit

    from qmgr.client import QueueManager, RangeInfo

__all__ = ["Member", "QueueStreamReader", "Remover", "plan_members"]

T = TypeVar("T")


class Member(NamedTuple):
    """One queue manager of a streaming read.

    Attributes:
        endpoint: where it is (``HOST:PORT``).
        guid: what it is (its GUID, as text).
        queue_id: the id of the queue read there when the query was planned.
    """

    endpoint: str
    guid: str
    queue_id: int


def plan_members(options: Options, queue: str) -> list[Member]:
    """The queue managers of ``options.members``, each asked for its identity and queue.

    Raises:
        DataSourceError: one cannot be reached or has no such queue, or two
            addresses reach the same queue manager.
    """

    def identify(qm: QueueManager) -> tuple[str, int]:
        return str(qm.qm_guid), measure(qm, queue, max_count=1).queue_id

    found = on_each(options, identify)
    return [
        Member(endpoint, guid, queue_id)
        for endpoint, (guid, queue_id) in zip(options.members, found, strict=True)
    ]


def check_guid(qm: QueueManager, member: Member) -> None:
    """Raise unless the queue manager reached at ``member.endpoint`` is still the one
    planned: an address that changed hands would apply one queue manager's offsets
    (and removals) to another's messages.

    Raises:
        DataSourceError
    """
    found = str(qm.qm_guid)
    if found != member.guid:
        check_guid_text(member.endpoint, found, member.guid)


def check_guid_text(endpoint: str, found: str, read: str) -> None:
    """Raise: ``endpoint`` reaches the queue manager ``found``, not ``read``, whose
    offsets and removals the query holds.

    Raises:
        DataSourceError
    """
    msg = (
        f"{endpoint} now reaches the queue manager {found}, not {read} "
        "that this query reads there: its offsets and removals belong to that one. "
        "Point the endpoint back at it, or start the query with a new checkpoint."
    )
    raise DataSourceError(msg)


class _Cursor:
    """The driver's side of one queue manager: its connection, its removals, its last message."""

    def __init__(self, options: Options, queue: str, member: Member) -> None:
        self.options = options.at(member.endpoint)
        self.queue = queue
        self.member = member
        self.qm: QueueManager | None = None
        #: Removes what Spark has committed, on a thread (None until the first removal).
        self.remover: Remover | None = None
        #: With Trigger.AvailableNow: the last message when the query started.
        self.available_now: int | None = None

    def call(self, operation: Callable[[QueueManager], T]) -> T:
        """Run ``operation`` on the connection; reconnect once if it broke."""
        from qmgr.client import ConnectionLost

        if self.qm is not None and not self.qm.closed:
            try:
                return operation(self.qm)
            except ConnectionLost:
                self.qm.close()  # the queue manager restarted, say: try a new connection
        self.qm = self.options.connect()
        check_guid(self.qm, self.member)
        return operation(self.qm)

    def measure(self, after: int = 0, max_count: int = 0) -> RangeInfo:
        """``measure_range`` of the queue, checking that it is still the one planned."""
        queue = self.queue
        info: RangeInfo = self.call(lambda qm: measure(qm, queue, after=after, max_count=max_count))
        check_queue_id(queue, self.member.queue_id, info.queue_id, self.member.endpoint)
        return info

    def remove_through(self, through: int) -> None:
        if not self.options.remove_on_commit:
            return
        if self.remover is None:
            self.remover = Remover(self.options, self.queue, self.member)
        self.remover.request(through)

    def stop(self) -> None:
        try:
            if self.remover is not None:
                self.remover.close()
        finally:
            if self.qm is not None:
                self.qm.close()
                self.qm = None


class QueueStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Micro-batches of a queue by LookupId, removed once Spark has committed them.

    The reader lives on the driver for the whole query and keeps one
    connection there per queue manager (never pickled); tasks open their own.
    """

    def __init__(
        self,
        options: Options,
        queue: str,
        members: Sequence[Member],
        columns: Sequence[str] = COLUMNS,
    ) -> None:
        self._options = options
        self._queue = queue
        self._members = tuple(members)
        self._columns = tuple(columns)
        self._cursors: list[_Cursor] | None = None
        #: The ends last returned by the argument-less ``latestOffset()`` (Spark 4.0, 4.1).
        self._last_end: list[int] | None = None

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_cursors"] = None
        return state

    @property
    def cursors(self) -> list[_Cursor]:
        """The driver's side of each queue manager, in the order of the members."""
        if self._cursors is None:
            self._cursors = [_Cursor(self._options, self._queue, m) for m in self._members]
        return self._cursors

    def _ends(self, offset: dict[str, Any]) -> list[int]:
        """The LookupId on each member of one of this query's offsets, checking queue ids.

        Raises:
            DataSourceError: the offset is not of this query's queue managers.
        """
        queue = self._queue
        single = "lookup_id" in offset
        if not self._options.fleet:
            if not single:
                msg = (
                    "the query's checkpoint was written with the option 'endpoints' (several "
                    "queue managers); read with 'endpoints' again, or start the query with a "
                    "new checkpoint location"
                )
                raise DataSourceError(msg)
            member = self._members[0]
            # A checkpoint written before offsets named their queue manager has no "guid".
            planned = offset.get("guid")
            if planned is not None and planned != member.guid:
                check_guid_text(member.endpoint, member.guid, planned)
            check_queue_id(queue, int(offset["queue_id"]), member.queue_id, member.endpoint)
            return [int(offset["lookup_id"])]
        if single:
            msg = (
                "the query's checkpoint was written with the option 'endpoint' (one queue "
                "manager); read with 'endpoint' again, or start the query with a new "
                "checkpoint location"
            )
            raise DataSourceError(msg)
        index = {member.guid: i for i, member in enumerate(self._members)}
        ends = [0] * len(self._members)  # a queue manager added since: from the beginning
        for guid, entry in offset.items():
            i = index.get(guid)
            if i is None:
                msg = (
                    f"the query's checkpoint reads the queue manager {guid} (at "
                    f"{entry.get('endpoint')}), which the option 'endpoints' does not reach: "
                    "a query goes on reading the queue managers it read (more may be added); "
                    "start it with a new checkpoint location to read fewer"
                )
                raise DataSourceError(msg)
            member = self._members[i]
            check_queue_id(queue, int(entry["queue_id"]), member.queue_id, member.endpoint)
            ends[i] = int(entry["lookup_id"])
        return ends

    def _offset(self, ends: Sequence[int]) -> dict[str, Any]:
        """The offset JSON of ``ends`` (a LookupId per member)."""
        if not self._options.fleet:
            member = self._members[0]
            return {"queue_id": member.queue_id, "lookup_id": ends[0], "guid": member.guid}
        return {
            member.guid: {
                "endpoint": member.endpoint,
                "queue_id": member.queue_id,
                "lookup_id": end,
            }
            for member, end in zip(self._members, ends, strict=True)
        }

    def initialOffset(self) -> dict[str, Any]:
        return self._offset([0] * len(self._members))

    def getDefaultReadLimit(self) -> ReadLimit:
        from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows

        limit = self._options.max_messages_per_trigger
        return ReadAllAvailable() if limit is None else ReadMaxRows(limit)

    def latestOffset(
        self, start: dict[str, Any] | None = None, limit: ReadLimit | None = None
    ) -> dict[str, Any]:
        """Where the next micro-batch ends: on each queue manager, at most the limit's
        messages after ``start``.

        Spark 4.2 and later give ``start`` and the read limit; before, Spark
        calls this without arguments and the reader goes on from the ends it
        returned last or planned last (``partitions``), and removes through
        them as through ``start``: either way, Spark asks only once that
        micro-batch is in its commit log. Knowing neither (a query's first
        call), it returns each queue's last message: Spark knows where it
        stopped, and any end at or above that is valid; one below it is not.
        """
        cursors = self.cursors
        if start is not None:
            afters = self._ends(start)
            max_count = _max_rows(limit)
        elif self._last_end is not None:
            # Spark 4.0, 4.1: asked again only once the micro-batch that ended
            # at the ends returned last (or replayed, see ``partitions``) is in
            # its commit log, so its messages can go now, as with ``start``.
            afters = list(self._last_end)
            max_count = self._options.max_messages_per_trigger or 0
        else:
            afters, max_count = [0] * len(cursors), 0
        pairs = list(zip(cursors, afters, strict=True))
        if start is not None or self._last_end is not None:
            for cursor, after in pairs:
                cursor.remove_through(after)
        infos = in_parallel([functools.partial(c.measure, a, max_count) for c, a in pairs])
        ends = []
        for (cursor, after), info in zip(pairs, infos, strict=True):
            end = max(after, info.last)
            if cursor.available_now is not None:
                end = max(after, min(end, cursor.available_now))
            if end == after and cursor.remover is not None:
                # Nothing new: no micro-batch waits, so finish the removal now. Spark
                # may end the query (Trigger.AvailableNow) and its Python worker next,
                # which would cut a removal still running on its thread.
                cursor.remover.wait()
            ends.append(end)
        self._last_end = ends
        return self._offset(ends)

    def prepareForTriggerAvailableNow(self) -> None:
        """Trigger.AvailableNow: read what the queues hold now, and stop there."""
        cursors = self.cursors
        infos = in_parallel([cursor.measure for cursor in cursors])
        for cursor, info in zip(cursors, infos, strict=True):
            cursor.available_now = info.last

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> list[InputPartition]:
        afters, throughs = self._ends(start), self._ends(end)
        # A restarted query replays an uncommitted micro-batch without asking
        # ``latestOffset``: the argument-less form goes on from its ends.
        last = self._last_end or [0] * len(throughs)
        self._last_end = [max(through, seen) for through, seen in zip(throughs, last, strict=True)]
        busy = [i for i, (lo, hi) in enumerate(zip(afters, throughs, strict=True)) if hi > lo]
        if self._options.partitions > 1:
            cursors = self.cursors
            infos = in_parallel([functools.partial(cursors[i].measure, afters[i], 1) for i in busy])
            firsts = [
                info.last if info.last > afters[i] else None
                for i, info in zip(busy, infos, strict=True)
            ]
        else:
            firsts = [None] * len(busy)
        parts: list[InputPartition] = []
        for i, first in zip(busy, firsts, strict=True):
            member = self._members[i]
            whole = LookupRange(
                self._queue, member.queue_id, afters[i], throughs[i], self._columns, member.endpoint
            )
            parts += whole.split(first, self._options.partitions)
        return parts

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, LookupRange)
        return read_range(self._options, partition)

    def commit(self, end: dict[str, Any]) -> None:
        """Remove the messages through ``end`` (unless ``removeOnCommit`` is false)."""
        for cursor, through in zip(self.cursors, self._ends(end), strict=True):
            cursor.remove_through(through)

    def stop(self) -> None:
        errors = []
        for cursor in self._cursors or []:
            try:
                cursor.stop()
            except Exception as exc:  # stop them all; then raise the first error
                errors.append(exc)
        if errors:
            raise errors[0]


class Remover:
    """``remove_through`` on a thread of its own, one removal at a time.

    Removing a micro-batch's messages (thousands of deletions and a synced
    commit in the queue manager) need not hold up the next micro-batch: the
    stream reader asks for it and goes on; the next request waits for the
    previous removal and raises its error, if it failed. Removal is
    idempotent, so one lost in a crash is done again by the next request.
    """

    def __init__(self, options: Options, queue: str, member: Member) -> None:
        self._options = options
        self._queue = queue
        self._member = member
        self._queue_id = member.queue_id
        self._qm: QueueManager | None = None
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None
        #: The highest LookupId asked for (0: none).
        self._requested = 0

    def request(self, through: int) -> None:
        """Remove through ``through`` (nothing if that was asked for already).

        Raises:
            the error of the previous removal, if it failed.
        """
        if through <= self._requested:
            return
        self.wait()
        self._requested = through
        self._thread = threading.Thread(
            target=self._run, args=(through,), name="qmgr-remove-through", daemon=True
        )
        self._thread.start()

    def wait(self) -> None:
        """Wait for the removal under way; raise its error if it failed."""
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        error, self._error = self._error, None
        if error is not None:
            raise error

    def close(self) -> None:
        """Finish the removal under way and close the connection."""
        try:
            self.wait()
        finally:
            if self._qm is not None:
                self._qm.close()
                self._qm = None

    def _run(self, through: int) -> None:
        from qmgr.client import ConnectionLost

        try:
            try:
                self._remove(through)
            except ConnectionLost:
                self._remove(through)  # the queue manager restarted, say: once more
        except BaseException as exc:
            self._error = exc
            self._requested = 0  # ask again next time

    def _remove(self, through: int) -> None:
        if self._qm is None or self._qm.closed:
            self._qm = self._options.connect()
            check_guid(self._qm, self._member)
        queue = self._queue
        found = measure(self._qm, queue, max_count=1).queue_id
        check_queue_id(queue, self._queue_id, found, self._options.endpoint)
        self._qm.remove_through(queue, through)


def _max_rows(limit: ReadLimit | None) -> int:
    """``measure_range``'s ``max_count`` for a read limit (0: everything available)."""
    rows = getattr(limit, "max_rows", None)  # ReadMaxRows; other limits read everything
    return int(rows) if rows else 0
