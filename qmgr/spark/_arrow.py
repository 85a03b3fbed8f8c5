"""Messages as Arrow record batches, and Arrow rows as messages to send.

The read side builds one ``pyarrow.RecordBatch`` per page of messages,
column by column, never row tuples: Spark takes Arrow batches from a Python
data source without converting each row in Python.

Correlation ids are 20 bytes laid out like a message id (a queue manager's
GUID and a 32-bit ordinal), so they are shown as a message id is,
``{guid}\\ordinal``: ``correlation_id = id`` finds the replies to a message.
Writing takes that form back, or 20 raw bytes from a binary column.

pyarrow and pyspark are imported inside the functions: this module is
loaded on every executor, before either may be needed.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, Final

from wire import format_message_id

from ._options import DataSourceError

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql.types import StructType

    from qmgr.client import Message, SendOptions

__all__ = [
    "COLUMNS",
    "SCHEMA_DDL",
    "WRITE_COLUMNS",
    "Send",
    "arrow_schema",
    "batch_to_sends",
    "check_write_schema",
    "correlation_text",
    "grouped_rows",
    "messages_to_batch",
    "plain_bodies",
    "read_columns",
    "rows_to_sends",
    "spark_schema",
]

#: The columns of a queue read as a DataFrame.
SCHEMA_DDL: Final = (
    "lookup_id BIGINT, id STRING, label STRING, body BINARY, correlation_id STRING, "
    "app_specific BIGINT, priority INT, message_class INT, sent_time TIMESTAMP, "
    "arrived_time TIMESTAMP, source_qm STRING, queue STRING"
)

#: Columns a written DataFrame may have, and the Spark types each accepts.
WRITE_COLUMNS: Final = {
    "body": ("binary", "string"),
    "label": ("string",),
    "correlation_id": ("string", "binary"),
    "app_specific": ("tinyint", "smallint", "int", "bigint"),
    "destination": ("string",),
}
_CORRELATION_TEXT: Final = re.compile(
    r"\{?([0-9a-fA-F]{8}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{12})\}?"
    r"\\(\d{1,10})"
)
_U32: Final = 0xFFFFFFFF

#: One message to send: destination, body and properties.
Send = tuple[str, bytes, "SendOptions"]


def spark_schema() -> StructType:
    """The read schema as a Spark ``StructType`` (:data:`SCHEMA_DDL`)."""
    from pyspark.sql.types import (
        BinaryType,
        IntegerType,
        LongType,
        StringType,
        StructField,
        StructType,
        TimestampType,
    )

    types = {
        "BIGINT": LongType(),
        "STRING": StringType(),
        "BINARY": BinaryType(),
        "INT": IntegerType(),
        "TIMESTAMP": TimestampType(),
    }
    fields = []
    for column in SCHEMA_DDL.split(", "):
        name, type_name = column.split()
        fields.append(StructField(name, types[type_name]))
    return StructType(fields)


#: The read schema's columns, in order.
COLUMNS: Final = tuple(column.split()[0] for column in SCHEMA_DDL.split(", "))


def _arrow_types() -> dict[str, pa.DataType]:
    import pyarrow as pa

    stamp = pa.timestamp("us", tz="UTC")
    return {
        "lookup_id": pa.int64(),
        "id": pa.string(),
        "label": pa.string(),
        "body": pa.binary(),
        "correlation_id": pa.string(),
        "app_specific": pa.int64(),
        "priority": pa.int32(),
        "message_class": pa.int32(),
        "sent_time": stamp,
        "arrived_time": stamp,
        "source_qm": pa.string(),
        "queue": pa.string(),
    }


_ARROW_TYPES: dict[str, pa.DataType] = {}
_ARROW_SCHEMAS: dict[tuple[str, ...], pa.Schema] = {}
_GUID_TEXT: dict[uuid.UUID, str] = {}


def _guid_text(guid: uuid.UUID) -> str:
    text = _GUID_TEXT.get(guid)
    if text is None:
        if len(_GUID_TEXT) > 256:
            _GUID_TEXT.clear()
        text = _GUID_TEXT[guid] = str(guid)
    return text


def correlation_text(raw: bytes) -> str | None:
    """A 20-byte correlation id as a message id's text: its GUID is in the
    [MS-DTYP] packet form (Data1-3 little-endian), as MSMQ lays an id out."""
    if not raw:
        return None
    return format_message_id(uuid.UUID(bytes_le=raw[:16]), int.from_bytes(raw[16:], "little"))


#: The columns that are a message property as it is, and the property's field.
_PROPERTY_FIELDS: Final = {
    "id": "message_id",
    "label": "label",
    "body": "body",
    "app_specific": "app_specific",
    "priority": "priority",
    "message_class": "message_class",
}


def _read_column(name: str, messages: Sequence[Message], props: list[Any]) -> pa.Array:
    """One column of the read schema for ``messages`` (``props``: their properties)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    kind = _ARROW_TYPES[name]
    field = _PROPERTY_FIELDS.get(name)
    if field is not None:
        values: list[Any] = [getattr(p, field) for p in props]
    elif name == "lookup_id":
        values = [m.lookup_id for m in messages]
    elif name == "correlation_id":
        values = [correlation_text(p.correlation_id) for p in props]
    elif name == "sent_time":
        seconds = pa.array([p.sent_time for p in props], pa.float64())
        return pc.cast(pc.multiply(seconds, 1_000_000.0), pa.int64(), safe=False).cast(kind)
    elif name == "arrived_time":
        values = [m.arrived_time for m in messages]
    elif name == "source_qm":
        values = [_guid_text(p.source_qm) for p in props]
    else:
        values = [messages[0].queue if messages else ""] * len(messages)
    return pa.array(values, kind)


def arrow_schema(columns: Sequence[str] = COLUMNS) -> pa.Schema:
    """The Arrow schema of ``columns`` of the read schema, in the order given."""
    import pyarrow as pa

    if not _ARROW_TYPES:
        _ARROW_TYPES.update(_arrow_types())
    key = tuple(columns)
    schema = _ARROW_SCHEMAS.get(key)
    if schema is None:
        schema = _ARROW_SCHEMAS[key] = pa.schema([(c, _ARROW_TYPES[c]) for c in key])
    return schema


def messages_to_batch(
    messages: Sequence[Message], columns: Sequence[str] = COLUMNS
) -> pa.RecordBatch:
    """The messages as one record batch of ``columns`` of the read schema (in the order given)."""
    import pyarrow as pa

    schema = arrow_schema(columns)
    key = tuple(columns)
    props = [m.properties for m in messages]
    arrays = [_read_column(name, messages, props) for name in key]
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


def read_columns(schema: StructType) -> tuple[str, ...]:
    """The columns to read for the schema Spark asks for: ours, or a subset given by the user.

    ``spark.read.format("qmgr").schema("lookup_id BIGINT, body BINARY")``
    reads only those columns, which saves converting the others.

    Raises:
        DataSourceError: a column that is not one of ours, or of another type.
    """
    ours = {field.name: field.dataType for field in spark_schema().fields}
    columns = []
    for field in schema.fields:
        wanted = ours.get(field.name)
        if wanted is None:
            msg = f"a queue has no column {field.name!r}; its columns are: {', '.join(ours)}"
            raise DataSourceError(msg)
        if field.dataType != wanted:
            msg = (
                f"the column {field.name!r} is {wanted.simpleString()}, "
                f"not {field.dataType.simpleString()}"
            )
            raise DataSourceError(msg)
        columns.append(field.name)
    if not columns:
        msg = "a schema given to read a queue needs at least one column"
        raise DataSourceError(msg)
    return tuple(columns)


def check_write_schema(schema: StructType, *, has_queue: bool) -> None:
    """Check the columns of a DataFrame to write, on the driver.

    Raises:
        DataSourceError: no ``body``, a column of ours with a type it cannot
            take, a column whose name looks like a typo of ours, or no
            ``queue`` option and no ``destination`` column.
    """
    import difflib

    types = {field.name.lower(): field.dataType.simpleString() for field in schema.fields}
    for name, type_name in types.items():
        allowed = WRITE_COLUMNS.get(name)
        if allowed is None:
            close = difflib.get_close_matches(name, WRITE_COLUMNS, n=1, cutoff=0.8)
            if close:
                msg = f"unknown column {name!r}; did you mean {close[0]!r}?"
                raise DataSourceError(msg)
            continue
        if type_name not in allowed:
            msg = f"the column {name!r} is {type_name}; it must be {' or '.join(allowed)}"
            raise DataSourceError(msg)
    if "body" not in types:
        found = ", ".join(types) or "none"
        msg = f"a DataFrame to write needs a 'body' column (binary or string); it has: {found}"
        raise DataSourceError(msg)
    if not has_queue and "destination" not in types:
        msg = (
            "the option 'queue' is required to write, unless the DataFrame has a "
            "'destination' column (the queue of each row)"
        )
        raise DataSourceError(msg)


def _correlation_bytes(value: Any) -> bytes | None:
    if value is None:
        return None
    if isinstance(value, bytes | bytearray):
        if len(value) != 20:
            msg = f"a binary correlation_id is 20 bytes, not {len(value)}"
            raise DataSourceError(msg)
        return bytes(value)
    match = _CORRELATION_TEXT.fullmatch(str(value).strip())
    if match is None or int(match.group(2)) > _U32:
        msg = f"a correlation_id is written as a message id, {{guid}}\\ordinal, not {value!r}"
        raise DataSourceError(msg)
    guid, ordinal = match.groups()
    return uuid.UUID(guid).bytes_le + int(ordinal).to_bytes(4, "little")


def _app_specific(value: Any) -> int:
    if value is None:
        return 0
    number = int(value)
    if not -(2**31) <= number <= _U32:
        msg = f"app_specific is a 32-bit value, not {number}"
        raise DataSourceError(msg)
    return number & _U32


def _column(
    names: Sequence[str], columns: Sequence[Sequence[Any]], name: str, rows: int
) -> Sequence[Any]:
    """The values of column ``name`` (a list), or a tuple of ``rows`` Nones if there is none."""
    for index, found in enumerate(names):
        if found.lower() == name:
            return list(columns[index])
    return (None,) * rows


def rows_to_sends(
    names: Sequence[str], columns: Sequence[Sequence[Any]], rows: int, queue: str | None
) -> Iterator[Send]:
    """The messages to send for ``rows`` rows given as columns of Python values.

    Raises:
        DataSourceError: a row has no body, or no destination and there is
            no ``queue`` option, or a value of ours is wrong.
    """
    bodies = _column(names, columns, "body", rows)
    labels = _column(names, columns, "label", rows)
    correlations = _column(names, columns, "correlation_id", rows)
    apps = _column(names, columns, "app_specific", rows)
    destinations = _column(names, columns, "destination", rows)
    if queue is not None and not any(
        isinstance(c, list) for c in (labels, correlations, apps, destinations)
    ):
        # Only bodies (the common case): no properties to convert.
        none: SendOptions = {}
        for body in bodies:
            if body is None:
                msg = "a row to write has a null body"
                raise DataSourceError(msg)
            yield queue, body.encode("utf-8") if isinstance(body, str) else body, none
        return
    for body, label, correlation, app, destination in zip(
        bodies, labels, correlations, apps, destinations, strict=True
    ):
        if body is None:
            msg = "a row to write has a null body"
            raise DataSourceError(msg)
        target = destination or queue
        if target is None:
            msg = "a row to write has a null destination and the option 'queue' was not given"
            raise DataSourceError(msg)
        options: SendOptions = {}
        if label:
            options["label"] = label
        if correlation is not None:
            options["correlation_id"] = _correlation_bytes(correlation)
        if app is not None:
            options["app_specific"] = _app_specific(app)
        yield target, body.encode("utf-8") if isinstance(body, str) else body, options


#: Rows of a row-based writer (Spark 4.0's stream writer) converted at once.
ROW_GROUP: Final = 1024


def _is_arrow(item: Any) -> bool:
    return hasattr(item, "schema") and hasattr(item, "columns")


def grouped_rows(items: Iterable[Any]) -> Iterator[Any]:
    """``items`` with runs of Spark ``Row`` objects gathered in lists of up to :data:`ROW_GROUP`.

    Arrow record batches pass as they are; :func:`batch_to_sends` takes both.
    """
    rows: list[Any] = []
    for item in items:
        if _is_arrow(item):
            if rows:
                yield rows
                rows = []
            yield item
            continue
        rows.append(item)
        if len(rows) >= ROW_GROUP:
            yield rows
            rows = []
    if rows:
        yield rows


def plain_bodies(batch: Any, queue: str | None) -> list[bytes] | None:
    """The bodies of a batch (as :func:`batch_to_sends` takes) whose rows are only bodies.

    None if there is no ``queue`` option or the rows have other columns of
    ours (each message then needs its own properties: :func:`batch_to_sends`).

    Raises:
        DataSourceError: a row has a null body.
    """
    if queue is None:
        return None
    arrow = _is_arrow(batch)
    rows: list[Any] = [] if arrow else batch if isinstance(batch, list) else [batch]
    if arrow:
        names = [name.lower() for name in batch.schema.names]
    else:
        names = [name.lower() for name in rows[0].asDict()] if rows else []
    if "body" not in names or (set(names) & WRITE_COLUMNS.keys()) != {"body"}:
        return None
    index = names.index("body")
    values = batch.column(index).to_pylist() if arrow else [row[index] for row in rows]
    bodies = [body.encode("utf-8") if isinstance(body, str) else body for body in values]
    if None in bodies:
        msg = "a row to write has a null body"
        raise DataSourceError(msg)
    return bodies


def batch_to_sends(batch: Any, queue: str | None) -> Iterator[Send]:
    """The messages to send for a ``pyarrow.RecordBatch``, a Spark ``Row`` or a list of rows.

    The rows of a list have the same fields (those of the DataFrame written).
    """
    if _is_arrow(batch):
        names = list(batch.schema.names)
        wanted = {n.lower() for n in names} & WRITE_COLUMNS.keys()
        columns = [
            batch.column(i).to_pylist() if name.lower() in wanted else ()
            for i, name in enumerate(names)
        ]
        return rows_to_sends(names, columns, batch.num_rows, queue)
    rows = batch if isinstance(batch, list) else [batch]
    if not rows:
        return iter(())
    names = list(rows[0].asDict())
    values = list(zip(*rows, strict=True))
    return rows_to_sends(names, values, len(rows), queue)
