"""The ``qmgr`` data source: what Spark calls on the driver to plan a read or a write.

Every planning call checks the options and asks the queue manager about the
queue before anything runs, so a wrong option, a queue manager that cannot
be reached within ``connectTimeout`` or a missing queue fails the query at
once with a message that says which (:class:`DataSourceError`).
"""

from __future__ import annotations

import time
import uuid
from typing import TYPE_CHECKING, Any, Final

from pyspark.sql.datasource import DataSource

from ._arrow import check_write_schema, read_columns, spark_schema
from ._options import DataSourceError, Options
from ._read import QueueBatchReader, plan_snapshots
from ._stream import QueueStreamReader, plan_members
from ._unpickle import by_value, qmgr_archive, restore
from ._write import QueueBatchWriter, QueueStreamWriter

if TYPE_CHECKING:
    from pyspark.sql.types import StructType

    from qmgr.client import QueueManager

__all__ = ["QueueDataSource"]

# A pickled data source carries the function that brings it back (see _unpickle).
by_value()

#: Seconds for which a write's queue manager and queue, once checked, are not checked again.
CHECK_AGAIN: Final = 30.0
_CHECKED: dict[tuple[str, str | None], float] = {}


class QueueDataSource(DataSource):
    """Queues of a qmgr queue manager as a Spark source and sink, batch and streaming.

    Register it once per session, then use the format ``"qmgr"``::

        spark.dataSource.register(QueueDataSource)
        df = spark.read.format("qmgr").option("endpoint", "127.0.0.1:1802") \\
            .option("queue", "orders").load()

    Options (names are case-insensitive): ``endpoint`` (``HOST:PORT``,
    required; or, to read, ``endpoints``: ``HOST:PORT,HOST:PORT,...``, the
    same queue on several queue managers), ``queue`` (required to read; to
    write unless rows have a ``destination``), ``maxMessagesPerTrigger``,
    ``removeOnCommit`` (default true), ``partitions`` (per queue manager) and
    ``connectTimeout`` (seconds, default 10). See docs/spark.md.
    """

    @classmethod
    def name(cls) -> str:
        return "qmgr"

    def __reduce__(self) -> tuple[Any, ...]:
        # Unpickled where qmgr is on the path, or in the zip it came from (see _unpickle).
        cls = type(self)
        state = self.__dict__.copy()
        return (restore, (qmgr_archive(), cls.__module__, cls.__name__, state))

    def _options(self) -> Options:
        return Options.parse(self.options)

    def schema(self) -> StructType:
        self._options()
        return spark_schema()

    def reader(self, schema: StructType) -> QueueBatchReader:
        options = self._options()
        queue = options.require_queue("to read")
        return QueueBatchReader(options, plan_snapshots(options, queue, read_columns(schema)))

    def streamReader(self, schema: StructType) -> QueueStreamReader:
        options = self._options()
        queue = options.require_queue("to read")
        members = plan_members(options, queue)
        return QueueStreamReader(options, queue, members, read_columns(schema))

    def _check_write(self, schema: StructType) -> Options:
        options = self._options()
        options.require_one("a write")
        check_write_schema(schema, has_queue=options.queue is not None)
        # Spark plans a streaming write again for every micro-batch: a queue
        # manager and queue found lately need not be asked about again.
        key = (options.endpoint, options.queue)
        if time.monotonic() - _CHECKED.get(key, -CHECK_AGAIN) >= CHECK_AGAIN:
            with options.connect() as qm:
                if options.queue is not None:
                    _check_destination(qm, options.queue)
            _CHECKED[key] = time.monotonic()
        return options

    def writer(self, schema: StructType, overwrite: bool) -> QueueBatchWriter:
        if overwrite:
            msg = "a queue can only be appended to: write with .mode('append')"
            raise DataSourceError(msg)
        return QueueBatchWriter(self._check_write(schema), uuid.uuid4().hex)

    def streamWriter(self, schema: StructType, overwrite: bool) -> QueueStreamWriter:
        # ``overwrite`` (output mode "complete"): each micro-batch's whole
        # result is sent, as for the other modes; a queue cannot be rewritten.
        options = self._check_write(schema)
        given = {str(key).lower(): value for key, value in self.options.items()}
        return QueueStreamWriter(options, given.get("checkpointlocation"))


def _check_destination(qm: QueueManager, queue: str) -> None:
    """Check that ``queue`` (a local name) exists and is transactional; format names pass.

    Raises:
        DataSourceError
    """
    if "=" in queue:
        return  # a format name (DIRECT=...): it may be on another queue manager
    wanted = queue.lower().removeprefix(".\\").removeprefix("private$\\")
    for info in qm.list_queues():
        if info.name.lower() == wanted:
            if not info.transactional:
                msg = (
                    f"the queue {queue!r} is not transactional; the qmgr sink writes in "
                    "transactions (create it with transactional=True)"
                )
                raise DataSourceError(msg)
            return
    msg = f"there is no queue {queue!r} on the queue manager at {qm.address}"
    raise DataSourceError(msg)
