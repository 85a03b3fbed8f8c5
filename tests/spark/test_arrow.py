"""Messages to Arrow batches and rows to sends (``qmgr.spark._arrow``), without Spark."""

from __future__ import annotations

import datetime as dt
import uuid

import pyarrow as pa
import pytest

from qmgr.client import Message
from qmgr.spark import DataSourceError
from qmgr.spark._arrow import batch_to_sends, messages_to_batch, spark_schema
from wire import MessageProperties


def message(lookup_id: int, **fields: object) -> Message:
    props = MessageProperties(**fields)  # type: ignore[arg-type]
    arrived = dt.datetime(2026, 1, 2, 3, 4, 5, 678000, tzinfo=dt.UTC)
    return Message(queue="orders", lookup_id=lookup_id, arrived_time=arrived, properties=props)


def test_messages_to_batch_has_the_schema_and_values() -> None:
    guid = uuid.uuid4()
    correlation = guid.bytes_le + (7).to_bytes(4, "little")  # as MSMQ lays an id out
    messages = [
        message(
            5,
            body=b"\x00\x01",
            label="first",
            source_qm=guid,
            ordinal=3,
            sent_time=1_700_000_000.25,
            correlation_id=correlation,
            app_specific=0xFFFFFFFF,
            priority=0,
            message_class=0x8000,
        ),
        message(9, body=b"", label=""),
    ]
    batch = messages_to_batch(messages)
    assert batch.schema.names == [f.name for f in spark_schema().fields]
    rows = batch.to_pylist()
    assert rows[0]["lookup_id"] == 5
    assert rows[0]["id"] == f"{{{guid}}}\\3"
    assert rows[0]["body"] == b"\x00\x01"
    assert rows[0]["correlation_id"] == f"{{{guid}}}\\7"
    assert rows[0]["app_specific"] == 0xFFFFFFFF
    assert rows[0]["message_class"] == 0x8000
    assert rows[0]["sent_time"] == dt.datetime.fromtimestamp(1_700_000_000.25, dt.UTC)
    assert rows[0]["arrived_time"] == dt.datetime(2026, 1, 2, 3, 4, 5, 678000, tzinfo=dt.UTC)
    assert rows[0]["source_qm"] == str(guid)
    assert rows[0]["queue"] == "orders"
    assert rows[1]["correlation_id"] is None
    assert rows[1]["lookup_id"] == 9


def test_rows_to_sends_takes_what_reads_give() -> None:
    guid = uuid.uuid4()
    batch = pa.RecordBatch.from_pydict(
        {
            "body": ["text", "more"],
            "label": ["a", None],
            "correlation_id": [f"{{{guid}}}\\12", None],
            "app_specific": [-1, None],
            "destination": [None, "elsewhere"],
            "lookup_id": [1, 2],  # not ours: ignored
        }
    )
    sends = list(batch_to_sends(batch, "orders"))
    assert sends[0] == (
        "orders",
        b"text",
        {"label": "a", "correlation_id": guid.bytes_le + (12).to_bytes(4, "little"),
         "app_specific": 0xFFFFFFFF},
    )  # fmt: skip
    assert sends[1] == ("elsewhere", b"more", {})


@pytest.mark.parametrize(
    ("columns", "message"),
    [
        ({"body": [None]}, "a row to write has a null body"),
        ({"body": [b"x"], "correlation_id": ["nope"]}, "a correlation_id is written as"),
        ({"body": [b"x"], "correlation_id": [b"short"]}, "a binary correlation_id is 20 bytes"),
        ({"body": [b"x"], "app_specific": [2**32]}, "app_specific is a 32-bit value"),
    ],
)
def test_rows_to_sends_errors(columns: dict[str, list[object]], message: str) -> None:
    batch = pa.RecordBatch.from_pydict(columns)
    with pytest.raises(DataSourceError, match=message):
        list(batch_to_sends(batch, "orders"))


def test_rows_without_destination_or_queue() -> None:
    batch = pa.RecordBatch.from_pydict({"body": [b"x"], "destination": [None]})
    with pytest.raises(DataSourceError, match="null destination"):
        list(batch_to_sends(batch, None))
