"""Reading a queue: LookupId ranges, the tasks that read them, and batch snapshots.

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
  LookupId E of the queue on each queue manager read (``endpoint``, or
  every one of ``endpoints``); the snapshot of each is (0, E], split into
  ``partitions`` ranges of about equal width from the first visible id.
  Nothing is removed.
* **Streaming read**: the same ranges, planned micro-batch by micro-batch
  and removed once Spark has committed them (``_stream``).
* Each task pages through its range with ``PeekRange`` requests on the
  range's queue manager, pages sized to about :data:`PAGE_BYTES`, asking
  for the next page before it turns the current one into an Arrow record
  batch (built from the frame's bytes, ``_page``) and yields it.

LookupIds and queue ids are a queue manager's own: a range names the queue
manager it was measured on, and reading several (``endpoints``) checks that
no queue manager is listed twice under two addresses, whose messages would
otherwise be read twice.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, Final, NamedTuple, TypeVar

from pyspark.sql.datasource import DataSourceReader, InputPartition

from ._arrow import COLUMNS
from ._options import DataSourceError, Options

if TYPE_CHECKING:
    import pyarrow as pa

    from qmgr.client import QueueManager

__all__ = [
    "LookupRange",
    "QueueBatchReader",
    "Snapshot",
    "in_parallel",
    "on_each",
    "plan_snapshots",
    "read_range",
    "split_range",
]

#: Bytes of message bodies a task asks for at once (and puts in one record batch).
PAGE_BYTES: Final = 4 * 1024 * 1024
#: Most messages in one page, whatever their size.
PAGE_MESSAGES: Final = 8192
#: Messages in a task's first page, before it knows how large they are.
FIRST_PAGE: Final = 1024
#: Most queue managers the driver talks to at once (``endpoints``).
MAX_PARALLEL: Final = 16

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
        endpoint: the queue manager holding the queue (None: the options' ``endpoint``).
    """

    def __init__(
        self,
        queue: str,
        queue_id: int,
        after: int,
        through: int,
        columns: Sequence[str] = COLUMNS,
        endpoint: str | None = None,
    ) -> None:
        super().__init__((after, through))
        self.queue = queue
        self.queue_id = queue_id
        self.after = after
        self.through = through
        self.columns = tuple(columns)
        self.endpoint = endpoint

    def __repr__(self) -> str:
        where = "" if self.endpoint is None else f" at {self.endpoint}"
        return f"LookupRange({self.queue!r}{where}, ({self.after}, {self.through}])"

    def split(self, first: int | None, parts: int) -> list[LookupRange]:
        """This range in at most ``parts`` ranges (see :func:`split_range`)."""
        return [
            LookupRange(self.queue, self.queue_id, lo, hi, self.columns, self.endpoint)
            for lo, hi in split_range(self.after, self.through, first, parts)
        ]


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


def check_queue_id(queue: str, expected: int, found: int, endpoint: str | None = None) -> None:
    """Raise unless ``found`` is ``expected`` (the queue was not created again).

    Raises:
        DataSourceError
    """
    if expected != found:
        where = "" if endpoint is None else f" at {endpoint}"
        msg = (
            f"the queue {queue!r}{where} is not the one this query read: its id was {expected} and "
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
    if part.endpoint is not None:
        options = options.at(part.endpoint)
    with options.connect() as qm:
        try:
            found = qm.measure_range(queue, after=through, max_count=1).queue_id
        except QueueNotFound:
            msg = f"the queue {queue!r} was deleted while it was being read"
            raise DataSourceError(msg) from None
        check_queue_id(queue, part.queue_id, found, part.endpoint)
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
    """``qm.measure_range`` with a missing queue or a refusal as a clear error.

    Raises:
        DataSourceError: the queue does not exist, or the connection's principal
            may not read it (or has not authenticated).
    """
    from qmgr.client import AccessDenied, QueueNotFound

    try:
        return qm.measure_range(queue, after=after, max_count=max_count)
    except QueueNotFound:
        msg = f"there is no queue {queue!r} on the queue manager at {qm.address}"
        raise DataSourceError(msg) from None
    except AccessDenied as exc:
        msg = (
            f"the queue manager at {qm.address} refused to let this query read {queue!r} "
            f"(the options 'token', or 'tlsCert' and 'tlsKey', and the queue's rights): {exc}"
        )
        raise DataSourceError(msg) from None


def in_parallel(calls: Sequence[Callable[[], T]]) -> list[T]:
    """The results of ``calls``, in order, made at once on threads (inline if one).

    Raises:
        the first call's error, in order, if any failed.
    """
    if len(calls) <= 1:
        return [call() for call in calls]
    with ThreadPoolExecutor(min(len(calls), MAX_PARALLEL), "qmgr-spark") as pool:
        futures = [pool.submit(call) for call in calls]
        return [future.result() for future in futures]


def on_each(options: Options, operation: Callable[[QueueManager], T]) -> list[T]:
    """``operation`` on a connection to each queue manager of ``options.members``, in order.

    Raises:
        DataSourceError: two of the addresses reach the same queue manager
            (its queues would be read twice), or one cannot be reached.
    """

    def run(endpoint: str) -> tuple[str, T]:
        with options.at(endpoint).connect() as qm:
            return str(qm.qm_guid), operation(qm)

    found = in_parallel([functools.partial(run, endpoint) for endpoint in options.members])
    seen: dict[str, str] = {}
    for endpoint, (guid, _) in zip(options.members, found, strict=True):
        if guid in seen:
            msg = (
                f"the option 'endpoints' names the same queue manager twice ({guid} at "
                f"{seen[guid]} and at {endpoint}): its queue would be read twice"
            )
            raise DataSourceError(msg)
        seen[guid] = endpoint
    return [result for _, result in found]


class Snapshot(NamedTuple):
    """A batch read's range on one queue manager, and its lowest visible LookupId."""

    whole: LookupRange
    first: int


def plan_snapshots(options: Options, queue: str, columns: Sequence[str]) -> list[Snapshot]:
    """The queue's snapshot, ``(0, last]``, on each queue manager of ``options.members``.

    Raises:
        DataSourceError
    """

    def snapshot(qm: QueueManager) -> tuple[int, int, int]:
        last = measure(qm, queue)
        return last.queue_id, last.last, measure(qm, queue, max_count=1).last

    found = on_each(options, snapshot)
    return [
        Snapshot(LookupRange(queue, queue_id, 0, last, columns, endpoint), first)
        for endpoint, (queue_id, last, first) in zip(options.members, found, strict=True)
    ]


class QueueBatchReader(DataSourceReader):
    """A snapshot of a queue, ``(0, last]`` on each queue manager read, removing nothing."""

    def __init__(self, options: Options, snapshots: Sequence[Snapshot]) -> None:
        """Read each of ``snapshots`` in ``options.partitions`` ranges."""
        self._options = options
        self._snapshots = tuple(snapshots)

    def partitions(self) -> list[InputPartition]:
        parts = self._options.partitions
        return [part for whole, first in self._snapshots for part in whole.split(first, parts)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, LookupRange)
        return read_range(self._options, partition)
