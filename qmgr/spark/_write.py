"""Writing to queues: all or nothing per job, and exactly once per micro-batch.

Theory of operation
-------------------
Every task sends its rows in transactions with global ids (xids) that it
*prepares*: the messages are stored, invisible, and committing them cannot
fail for want of room. The task returns the xids to the driver, which
commits the xids of every task of the job or micro-batch in **one atomic
call** (``commit_prepared_all``). Until then nothing is visible; if the job
fails, the driver aborts them. A task writes at most :data:`CHUNK_MESSAGES`
messages or :data:`CHUNK_BYTES` bytes per transaction (a queue manager
limits transactions' sizes) and lists every xid it prepared.

* **Batch**: xids ``spark-batch:{job}:{partition}:{nonce}``, ``job`` a
  uuid made on the driver when the write is planned. ``abort`` aborts the
  listed xids and every other prepared one of the job (a failed or retried
  task's), so an aborted job leaves nothing behind.
* **Streaming**: xids ``spark:{query id}:{batch id}:{partition}:{nonce}``;
  tasks read the query id (kept in the checkpoint, the same after a
  restart) and the batch id from the task's local properties. Spark runs
  a micro-batch again with the same id when a crash came before its commit
  log was written, whether or not the sink had committed it. A task that
  finds a *committed* xid of its batch knows the batch is already in the
  queues and writes nothing; the driver's commit does the same check, so a
  replayed batch writes nothing twice. A driver that dies between prepare
  and commit leaves prepared transactions: every commit aborts the
  prepared xids of its query with a batch id up to its own that it did not
  commit (a restarted query replays that batch and then commits it), so
  they are cleaned up by the first micro-batch after the restart.

In-doubt transactions can always be seen with ``qmgr tx list`` and
resolved by hand with ``qmgr tx commit|abort XID``.
"""

from __future__ import annotations

import contextlib
import json
import time
import uuid
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from pyspark.sql.datasource import DataSourceArrowWriter, WriterCommitMessage

from ._arrow import batch_to_sends, grouped_rows, plain_bodies
from ._options import DataSourceError, Options

try:  # Spark 4.1 and later hand a stream writer Arrow batches.
    from pyspark.sql.datasource import DataSourceStreamArrowWriter as _StreamWriterBase
except ImportError:  # pragma: no cover - Spark 4.0: rows
    from pyspark.sql.datasource import (  # type: ignore[assignment]
        DataSourceStreamWriter as _StreamWriterBase,
    )

if TYPE_CHECKING:
    from qmgr.client import QueueManager, Transaction

__all__ = [
    "BATCH_PREFIX",
    "STREAM_PREFIX",
    "PreparedWrite",
    "QueueBatchWriter",
    "QueueStreamWriter",
]

#: Most messages in one transaction of a task.
CHUNK_MESSAGES: Final = 50_000
#: Most body bytes in one transaction of a task.
CHUNK_BYTES: Final = 64 * 1024 * 1024
#: Seconds an aborting job waits before it looks for prepared transactions again.
ABORT_RECHECK: Final = 1.0
#: Most xids resolved in one call (the queue manager's limit).
MAX_XIDS: Final = 10_000
BATCH_PREFIX: Final = "spark-batch"
STREAM_PREFIX: Final = "spark"
#: Local properties Spark gives the tasks of a streaming query.
QUERY_ID_PROPERTY: Final = "sql.streaming.queryId"
BATCH_ID_PROPERTY: Final = "streaming.sql.batchId"


class PreparedWrite(WriterCommitMessage):
    """What a task tells the driver: the xids it prepared and how many messages they hold.

    Attributes:
        xids: the prepared transactions, empty if the task had no rows.
        messages: messages sent in them.
        query_id: the streaming query's id ("" for a batch job).
        batch_id: the micro-batch (-1 for a batch job).
        skipped: the micro-batch had already been committed; nothing was written.
    """

    def __init__(
        self,
        xids: Sequence[str],
        messages: int,
        *,
        query_id: str = "",
        batch_id: int = -1,
        skipped: bool = False,
    ) -> None:
        self.xids = tuple(xids)
        self.messages = messages
        self.query_id = query_id
        self.batch_id = batch_id
        self.skipped = skipped

    def __repr__(self) -> str:
        state = " skipped" if self.skipped else ""
        return f"PreparedWrite({len(self.xids)} xids, {self.messages} messages{state})"


def _send_prepared(
    qm: QueueManager, batches: Iterable[Any], queue: str | None, prefix: str
) -> tuple[list[str], int]:
    """Send every row in transactions ``prefix + nonce`` and prepare them; ``(xids, count)``.

    Rows that are only bodies go out by :func:`send_bodies`, a batch at a
    time; others one by one with their properties. A failure aborts the
    transaction under way (the queue manager also aborts an unprepared one
    when the connection closes) and is raised.
    """
    from qmgr.client._bulk import send_bodies

    xids: list[str] = []
    sent = 0
    tx: Transaction | None = None
    xid = ""
    messages = size = 0

    def open_tx() -> Transaction:
        nonlocal tx, xid, messages, size
        if tx is None:
            xid = f"{prefix}{uuid.uuid4().hex[:12]}"
            tx = qm.begin(xid=xid)
            messages = size = 0
        return tx

    def chunk_full() -> bool:
        return messages >= CHUNK_MESSAGES or size >= CHUNK_BYTES

    def prepare() -> None:
        nonlocal tx, sent
        assert tx is not None
        tx.prepare()
        xids.append(xid)
        sent += messages
        tx = None

    try:
        for batch in grouped_rows(batches):
            bodies = plain_bodies(batch, queue)
            if bodies is not None:
                assert queue is not None
                index = 0
                while index < len(bodies):
                    current = open_tx()
                    start = index
                    while index < len(bodies) and not chunk_full():
                        size += len(bodies[index])
                        messages += 1
                        index += 1
                    send_bodies(current, queue, bodies[start:index])
                    if chunk_full():
                        prepare()
                continue
            for destination, body, options in batch_to_sends(batch, queue):
                open_tx().send(destination, body, **options)
                messages += 1
                size += len(body)
                if chunk_full():
                    prepare()
        if tx is not None:
            prepare()
    except BaseException:
        if tx is not None and not tx.ended:
            with contextlib.suppress(Exception):
                tx.abort()
        raise
    return xids, sent


def _prepared(qm: QueueManager, prefix: str) -> list[str]:
    """The prepared xids that start with ``prefix`` (at most :data:`MAX_XIDS`)."""
    return [t.xid for t in qm.transactions(prefix, limit=MAX_XIDS)]


def _abort(qm: QueueManager, xids: Sequence[str]) -> None:
    """Abort ``xids`` (prepared ones; any that is not is skipped)."""
    from qmgr.client import QueueError

    for start in range(0, len(xids), MAX_XIDS):
        chunk = xids[start : start + MAX_XIDS]
        try:
            qm.abort_prepared_all(chunk)
        except QueueError:
            # One of them was resolved meanwhile: abort the others one by one.
            for xid in chunk:
                with contextlib.suppress(QueueError):
                    qm.abort_prepared(xid)


def _listed(messages: Sequence[WriterCommitMessage | None]) -> list[PreparedWrite]:
    return [m for m in messages if isinstance(m, PreparedWrite)]


def _prepared_xids(
    messages: Sequence[WriterCommitMessage | None], who: str, advice: str
) -> list[str]:
    """The xids the tasks prepared, which one commit must resolve together.

    Raises:
        DataSourceError: more than one commit takes (``who`` prepared them;
            ``advice`` says how to prepare fewer).
    """
    xids = [xid for m in _listed(messages) for xid in m.xids]
    if len(xids) > MAX_XIDS:
        msg = (
            f"{who} prepared {len(xids)} transactions; one commit takes at most "
            f"{MAX_XIDS}: {advice}"
        )
        raise DataSourceError(msg)
    return xids


class QueueBatchWriter(DataSourceArrowWriter):
    """``df.write.format("qmgr")``: every row of the job, or none, in the queues."""

    def __init__(self, options: Options, job: str) -> None:
        self._options = options
        self._job = job

    @property
    def job_prefix(self) -> str:
        """The prefix of every xid of this job."""
        return f"{BATCH_PREFIX}:{self._job}:"

    def write(self, iterator: Iterator[Any]) -> PreparedWrite:
        from pyspark import TaskContext

        context = TaskContext.get()
        partition = context.partitionId() if context is not None else 0
        with self._options.connect() as qm:
            prefix = f"{self.job_prefix}{partition}:"
            xids, count = _send_prepared(qm, iterator, self._options.queue, prefix)
        return PreparedWrite(xids, count)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        xids = _prepared_xids(messages, "the job", "write with fewer partitions")
        if xids:
            self._commit_all(xids)
        # The rows are in their queues: nothing may fail the job from here on
        # (Spark would report it failed, and the job run again would write them
        # twice). Tasks that were retried or ran twice (speculation) prepared
        # others: aborted now if the queue manager answers, else left in doubt
        # for `qmgr tx list` (nothing of theirs is applied).
        committed = set(xids)
        with contextlib.suppress(Exception), self._options.connect() as qm:
            _abort(qm, [x for x in _prepared(qm, self.job_prefix) if x not in committed])

    def _commit_all(self, xids: list[str]) -> None:
        """Commit the job's transactions together; a connection lost meanwhile
        leaves the outcome in doubt, so it is asked for, not taken as a failure."""
        from qmgr.client import ConnectionLost, TransactionStatus

        try:
            with self._options.connect() as qm:
                qm.commit_prepared_all(xids)
                return
        except ConnectionLost:
            pass
        with self._options.connect() as qm:
            known = qm.transactions(self.job_prefix, resolved=True, limit=MAX_XIDS)
            states = {t.xid: t.state for t in known}
            if all(states.get(x) == TransactionStatus.COMMITTED for x in xids):
                return
            if all(states.get(x) == TransactionStatus.PREPARED for x in xids):
                qm.commit_prepared_all(xids)  # the commit never reached the queue manager
                return
        msg = (
            "the job's commit was cut off and its transactions are neither all committed "
            f"nor all prepared; see `qmgr tx list --all --prefix {self.job_prefix}`"
        )
        raise DataSourceError(msg)

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        with self._options.connect() as qm:
            _abort(qm, _prepared(qm, self.job_prefix))
            # Spark does not wait for the tasks it cancels after a failure: one
            # may still prepare. Look again once they have had time to end.
            time.sleep(ABORT_RECHECK)
            _abort(qm, _prepared(qm, self.job_prefix))


def _batch_of(xid: str) -> int:
    """The batch id in a streaming xid (-1 if it has none)."""
    parts = xid.split(":")
    try:
        return int(parts[2])
    except (IndexError, ValueError):
        return -1


def query_id_from_checkpoint(location: str | None) -> str | None:
    """The query id kept in a local checkpoint directory's ``metadata`` file, if it can be read."""
    if not location:
        return None
    path = location.removeprefix("file://").removeprefix("file:")
    if "://" in path:
        return None
    try:
        value = json.loads((Path(path) / "metadata").read_text(encoding="utf-8")).get("id")
    except (OSError, ValueError, AttributeError):
        return None
    return value if isinstance(value, str) else None


class QueueStreamWriter(_StreamWriterBase):
    """``df.writeStream.format("qmgr")``: each micro-batch in the queues exactly once."""

    def __init__(self, options: Options, checkpoint: str | None = None) -> None:
        self._options = options
        self._checkpoint = checkpoint

    def write(self, iterator: Iterator[Any]) -> PreparedWrite:
        from pyspark import TaskContext

        from qmgr.client import TransactionStatus

        context = TaskContext.get()
        assert context is not None, "a stream writer's write() runs in a Spark task"
        query_id = context.getLocalProperty(QUERY_ID_PROPERTY)
        batch_text = context.getLocalProperty(BATCH_ID_PROPERTY)
        if not query_id or batch_text is None:
            msg = "a streaming write task has no query id or batch id in its local properties"
            raise DataSourceError(msg)
        batch_id = int(batch_text)
        batch_prefix = f"{STREAM_PREFIX}:{query_id}:{batch_id}:"
        with self._options.connect() as qm:
            known = qm.transactions(batch_prefix, resolved=True, limit=MAX_XIDS)
            if any(t.state == TransactionStatus.COMMITTED for t in known):
                return PreparedWrite((), 0, query_id=query_id, batch_id=batch_id, skipped=True)
            prefix = f"{batch_prefix}{context.partitionId()}:"
            xids, count = _send_prepared(qm, iterator, self._options.queue, prefix)
        return PreparedWrite(xids, count, query_id=query_id, batch_id=batch_id)

    def _query_id(self, messages: Sequence[WriterCommitMessage | None]) -> str | None:
        for message in _listed(messages):
            if message.query_id:
                return message.query_id
        return query_id_from_checkpoint(self._checkpoint)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        from qmgr.client import TransactionStatus

        query_id = self._query_id(messages)
        if query_id is None:
            return  # no task wrote anything and the query id is unknown: nothing to do
        listed = _prepared_xids(messages, f"micro-batch {batchId}", "use fewer partitions")
        query_prefix = f"{STREAM_PREFIX}:{query_id}:"
        with self._options.connect() as qm:
            known = qm.transactions(f"{query_prefix}{batchId}:", resolved=True, limit=MAX_XIDS)
            committed: set[str] = set()
            if any(t.state == TransactionStatus.COMMITTED for t in known):
                pass  # the batch is in the queues already: the new ones are leftovers
            elif listed:
                qm.commit_prepared_all(listed)
                committed.update(listed)
            leftovers = [
                xid
                for xid in _prepared(qm, query_prefix)
                if xid not in committed and _batch_of(xid) <= batchId
            ]
            _abort(qm, leftovers)

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        query_id = self._query_id(messages)
        if query_id is None:
            return
        with self._options.connect() as qm:
            _abort(qm, _prepared(qm, f"{STREAM_PREFIX}:{query_id}:{batchId}:"))
