"""Reading a queue: batch snapshots and micro-batches, both as LookupId ranges.

Theory of operation
-------------------
A queue gives each message a LookupId when its append commits, increasing
in commit order, so every message that becomes visible later has a higher
id than any seen before. A LookupId is therefore a reliable cursor: the
messages with ``after < lookup_id <= through`` are a fixed set once
``through`` has been measured, and reading that range again (a task retry,
a micro-batch replayed after a crash) returns the same messages as long as
nobody else removed any of them.

* **Batch read**: on the driver, ``measure_range`` gives the last visible
  LookupId E; the snapshot is (0, E], split into ``partitions`` ranges of
  about equal width from the first visible id. Nothing is removed.
* **Streaming read**: offsets are ``{"queue_id", "lookup_id"}``. The driver
  measures where the next micro-batch ends (at most
  ``maxMessagesPerTrigger`` messages after the start), plans the range in
  partitions, and once Spark has committed a micro-batch removes its
  messages with ``remove_through`` (idempotent; the journal gets its
  copies), on a thread of its own (:class:`Remover`) so that the next
  micro-batch does not wait for it. Spark commits a source one micro-batch
  late, after the next batch's offsets are in its write-ahead log, so a
  batch that is replayed after a crash still finds every one of its
  messages. Spark asks for the end of the next micro-batch
  (``latestOffset(start)``, Spark 4.2 and later) only once the micro-batch
  that ended at ``start`` is in its commit log, and a restarted query
  replays an uncommitted micro-batch without asking: so ``latestOffset``
  removes through ``start`` as well, and the last micro-batch's messages
  leave the queue at the next trigger instead of waiting for more to come.
* Each task pages through its range with ``PeekRange`` requests, pages
  sized to about :data:`PAGE_BYTES`, asking for the next page before it
  turns the current one into an Arrow record batch (built from the frame's
  bytes, ``_page``) and yields it.

The queue id in the offsets catches a queue that was deleted and created
again under the same name: its LookupIds start afresh, so the offsets of a
checkpoint mean nothing there, and the query stops with a clear error.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, Final, TypeVar

from pyspark.sql.datasource import DataSourceReader, DataSourceStreamReader, InputPartition

try:
    from pyspark.sql.streaming.datasource import SupportsTriggerAvailableNow
except ImportError:  # pragma: no cover - Spark 4.0 and 4.1

    class SupportsTriggerAvailableNow:  # type: ignore[no-redef]
        """Before Spark 4.2, Python sources do not take part in Trigger.AvailableNow."""


from ._arrow import COLUMNS
from ._options import DataSourceError, Options

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql.streaming.datasource import ReadLimit

    from qmgr.client import QueueManager

__all__ = ["LookupRange", "QueueBatchReader", "QueueStreamReader", "read_range", "split_range"]

#: Bytes of message bodies a task asks for at once (and puts in one record batch).
PAGE_BYTES: Final = 4 * 1024 * 1024
#: Most messages in one page, whatever their size.
PAGE_MESSAGES: Final = 8192
#: Messages in a task's first page, before it knows how large they are.
FIRST_PAGE: Final = 1024

T = TypeVar("T")


class LookupRange(InputPartition):
    """One task's share of a read: the messages of ``queue`` with ``after < lookup_id <= through``.

    Attributes:
        queue: the queue's name.
        queue_id: the queue's id when the read was planned (a queue created
            again under the same name has another).
        after: the range's exclusive start.
        through: the range's inclusive end.
        columns: the columns to read, in order.
    """

    def __init__(
        self,
        queue: str,
        queue_id: int,
        after: int,
        through: int,
        columns: Sequence[str] = COLUMNS,
    ) -> None:
        super().__init__((after, through))
        self.queue = queue
        self.queue_id = queue_id
        self.after = after
        self.through = through
        self.columns = tuple(columns)

    def __repr__(self) -> str:
        return f"LookupRange({self.queue!r}, ({self.after}, {self.through}])"


def split_range(after: int, through: int, first: int | None, parts: int) -> list[tuple[int, int]]:
    """Split ``(after, through]`` into at most ``parts`` ranges that together are exactly it.

    ``first`` is the lowest visible LookupId above ``after`` (None if none):
    the ranges are of equal width from there, so a queue whose ids start
    high is not read by one task alone.
    """
    if through <= after:
        return [(after, through)]
    low = after if first is None or first > through else max(after, first - 1)
    width = through - low
    count = max(1, min(parts, width))
    bounds = [low + width * i // count for i in range(count + 1)]
    ranges = list(itertools.pairwise(bounds))
    ranges[0] = (after, ranges[0][1])
    return ranges


def check_queue_id(queue: str, expected: int, found: int) -> None:
    """Raise unless ``found`` is ``expected`` (the queue was not created again).

    Raises:
        DataSourceError
    """
    if expected != found:
        msg = (
            f"the queue {queue!r} is not the one this query read: its id was {expected} and "
            f"is now {found} (it was deleted and created again, so LookupIds started afresh). "
            "Start the query again with a new checkpoint location."
        )
        raise DataSourceError(msg)


def read_range(options: Options, part: LookupRange) -> Iterator[pa.RecordBatch]:
    """The messages of one range, as record batches of the read schema (runs in a task).

    Pages come raw (``qmgr.client._pages``) and become record batches
    without ``Message`` objects (``_page``); the request for the next page
    goes out before this one is turned into a batch and handed to Spark, so
    the queue manager reads it meanwhile.
    """
    from qmgr.client import QueueNotFound
    from qmgr.client._pages import page_body, request_page

    from ._page import decode_page

    queue, after, through = part.queue, part.after, part.through
    if through <= after:
        return
    with options.connect() as qm:
        try:
            found = qm.measure_range(queue, after=through, max_count=1).queue_id
        except QueueNotFound:
            msg = f"the queue {queue!r} was deleted while it was being read"
            raise DataSourceError(msg) from None
        check_queue_id(queue, part.queue_id, found)
        request = request_page(qm, queue, after, min(FIRST_PAGE, through - after))
        while True:
            page = decode_page(page_body(request), through)
            done = page.count == 0 or page.beyond or page.last >= through
            if not done:
                size = page.body_bytes // page.count + 256
                want = max(1, min(PAGE_MESSAGES, PAGE_BYTES // size))
                request = request_page(qm, queue, page.last, min(want, through - page.last))
            batch = page.batch(part.columns)
            if batch is not None:
                yield batch
            if done:
                return


def measure(qm: QueueManager, queue: str, *, after: int = 0, max_count: int = 0) -> Any:
    """``qm.measure_range`` with a missing queue as a clear error.

    Raises:
        DataSourceError: the queue does not exist.
    """
    from qmgr.client import QueueNotFound

    try:
        return qm.measure_range(queue, after=after, max_count=max_count)
    except QueueNotFound:
        msg = f"there is no queue {queue!r} on the queue manager at {qm.address}"
        raise DataSourceError(msg) from None


class QueueBatchReader(DataSourceReader):
    """A snapshot of a queue, ``(0, last]``, read without removing anything."""

    def __init__(self, options: Options, snapshot: LookupRange, first: int) -> None:
        """Read ``snapshot`` (``first``: its lowest visible LookupId) in ``options.partitions``."""
        self._options = options
        self._snapshot = snapshot
        self._first = first

    def partitions(self) -> list[InputPartition]:
        whole = self._snapshot
        ranges = split_range(whole.after, whole.through, self._first, self._options.partitions)
        return [
            LookupRange(whole.queue, whole.queue_id, lo, hi, whole.columns) for lo, hi in ranges
        ]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, LookupRange)
        return read_range(self._options, partition)


class QueueStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Micro-batches of a queue by LookupId, removed once Spark has committed them.

    The reader lives on the driver for the whole query and keeps one
    connection there (never pickled); tasks open their own.
    """

    def __init__(
        self, options: Options, queue: str, queue_id: int, columns: Sequence[str] = COLUMNS
    ) -> None:
        self._options = options
        self._queue = queue
        self._queue_id = queue_id
        self._columns = tuple(columns)
        self._qm: QueueManager | None = None
        #: The end last returned by the argument-less ``latestOffset()`` (Spark 4.0, 4.1).
        self._last_end: int | None = None
        #: Removes what Spark has committed, on a thread (None until the first removal).
        self._remover: Remover | None = None
        #: With Trigger.AvailableNow: the last message when the query started.
        self._available_now: int | None = None

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_qm"] = state["_remover"] = None
        return state

    def _call(self, operation: Callable[[QueueManager], T]) -> T:
        """Run ``operation`` on the driver's connection; reconnect once if it broke."""
        from qmgr.client import ConnectionLost

        if self._qm is not None and not self._qm.closed:
            try:
                return operation(self._qm)
            except ConnectionLost:
                self._qm.close()  # the queue manager restarted, say: try a new connection
        self._qm = self._options.connect()
        return operation(self._qm)

    def _offset(self, offset: dict[str, Any]) -> int:
        """The LookupId of one of this query's offsets, checking its queue id."""
        check_queue_id(self._queue, int(offset["queue_id"]), self._queue_id)
        return int(offset["lookup_id"])

    def initialOffset(self) -> dict[str, int]:
        return {"queue_id": self._queue_id, "lookup_id": 0}

    def getDefaultReadLimit(self) -> ReadLimit:
        from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows

        limit = self._options.max_messages_per_trigger
        return ReadAllAvailable() if limit is None else ReadMaxRows(limit)

    def latestOffset(
        self, start: dict[str, Any] | None = None, limit: ReadLimit | None = None
    ) -> dict[str, int]:
        """Where the next micro-batch ends: at most the limit's messages after ``start``.

        Spark 4.2 and later give ``start`` and the read limit; before, Spark
        calls this without arguments and the reader goes on from the end it
        returned last or planned last (``partitions``), and removes through
        it as through ``start``: either way, Spark asks only once that
        micro-batch is in its commit log. Knowing neither (a query's first
        call), it returns the queue's last message: Spark knows where it
        stopped, and any end at or above that is valid; one below it is not.
        """
        if start is not None:
            after = self._offset(start)
            max_count = _max_rows(limit)
            self._remove_through(after)
        elif self._last_end is not None:
            # Spark 4.0, 4.1: asked again only once the micro-batch that ended
            # at the end returned last (or replayed, see ``partitions``) is in
            # its commit log, so its messages can go now, as with ``start``.
            after = self._last_end
            max_count = self._options.max_messages_per_trigger or 0
            self._remove_through(after)
        else:
            after, max_count = 0, 0
        queue = self._queue
        info = self._call(lambda qm: measure(qm, queue, after=after, max_count=max_count))
        check_queue_id(queue, self._queue_id, info.queue_id)
        end = max(after, info.last)
        if self._available_now is not None:
            end = max(after, min(end, self._available_now))
        if end == after and self._remover is not None:
            # Nothing new: no micro-batch waits, so finish the removal now. Spark
            # may end the query (Trigger.AvailableNow) and its Python worker next,
            # which would cut a removal still running on its thread.
            self._remover.wait()
        self._last_end = end
        return {"queue_id": info.queue_id, "lookup_id": end}

    def prepareForTriggerAvailableNow(self) -> None:
        """Trigger.AvailableNow: read what the queue holds now, and stop there."""
        queue = self._queue
        self._available_now = self._call(lambda qm: measure(qm, queue)).last

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> list[InputPartition]:
        after, through = self._offset(start), self._offset(end)
        # A restarted query replays an uncommitted micro-batch without asking
        # ``latestOffset``: the argument-less form goes on from its end.
        self._last_end = max(through, self._last_end or 0)
        if through <= after:
            return []
        queue = self._queue
        if self._options.partitions > 1:
            info = self._call(lambda qm: measure(qm, queue, after=after, max_count=1))
            first = info.last if info.last > after else None
        else:
            first = None
        ranges = split_range(after, through, first, self._options.partitions)
        queue_id, columns = self._queue_id, self._columns
        return [LookupRange(queue, queue_id, lo, hi, columns) for lo, hi in ranges]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, LookupRange)
        return read_range(self._options, partition)

    def commit(self, end: dict[str, Any]) -> None:
        """Remove the messages through ``end`` (unless ``removeOnCommit`` is false)."""
        self._remove_through(self._offset(end))

    def _remove_through(self, through: int) -> None:
        if not self._options.remove_on_commit:
            return
        if self._remover is None:
            self._remover = Remover(self._options, self._queue, self._queue_id)
        self._remover.request(through)

    def stop(self) -> None:
        try:
            if self._remover is not None:
                self._remover.close()
        finally:
            if self._qm is not None:
                self._qm.close()
                self._qm = None


class Remover:
    """``remove_through`` on a thread of its own, one removal at a time.

    Removing a micro-batch's messages (thousands of deletions and a synced
    commit in the queue manager) need not hold up the next micro-batch: the
    stream reader asks for it and goes on; the next request waits for the
    previous removal and raises its error, if it failed. Removal is
    idempotent, so one lost in a crash is done again by the next request.
    """

    def __init__(self, options: Options, queue: str, queue_id: int) -> None:
        self._options = options
        self._queue = queue
        self._queue_id = queue_id
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
        queue = self._queue
        check_queue_id(queue, self._queue_id, measure(self._qm, queue, max_count=1).queue_id)
        self._qm.remove_through(queue, through)


def _max_rows(limit: ReadLimit | None) -> int:
    """``measure_range``'s ``max_count`` for a read limit (0: everything available)."""
    rows = getattr(limit, "max_rows", None)  # ReadMaxRows; other limits read everything
    return int(rows) if rows else 0
