"""The data source's pieces without Spark: options, LookupId ranges, Arrow conversion."""

from __future__ import annotations

import datetime as dt
import uuid

import pyarrow as pa
import pytest

from qmgr.client import Message
from qmgr.spark import DataSourceError, Options
from qmgr.spark._arrow import batch_to_sends, messages_to_batch, spark_schema
from qmgr.spark._read import split_range
from qmgr.spark._write import _batch_of, query_id_from_checkpoint
from wire import MessageProperties

# ---------------------------------------------------------------- options


def test_options_defaults_and_case_insensitive_names() -> None:
    options = Options.parse({"ENDPOINT": "127.0.0.1:1802", "Queue": "orders"})
    assert options == Options(endpoint="127.0.0.1:1802", queue="orders")
    assert options.max_messages_per_trigger is None
    assert options.remove_on_commit is True
    assert options.connect_timeout == 10.0


def test_options_every_value() -> None:
    options = Options.parse(
        {
            "endpoint": "[::1]:1802",
            "maxmessagespertrigger": "500",
            "removeOnCommit": "False",
            "partitions": "4",
            "connectTimeout": "0.5",
            "checkpointLocation": "/tmp/x",  # Spark's own options are ignored
            "path": "whatever",
        }
    )
    assert options.endpoint == "[::1]:1802"
    assert options.queue is None
    assert options.max_messages_per_trigger == 500
    assert options.remove_on_commit is False
    assert options.partitions == 4
    assert options.connect_timeout == 0.5


@pytest.mark.parametrize(
    ("given", "message"),
    [
        ({}, "the option 'endpoint' is required"),
        ({"endpoint": "  "}, "the option 'endpoint' is empty"),
        ({"endpoint": "localhost"}, "must be HOST:PORT"),
        ({"endpoint": "host:99999"}, "must be HOST:PORT"),
        ({"endpoint": "a:b:1802"}, "must be HOST:PORT"),
        ({"maxMessagesPerTrigger": "0"}, "'maxMessagesPerTrigger' must be an integer >= 1"),
        ({"maxMessagesPerTrigger": "ten"}, "'maxMessagesPerTrigger' must be an integer >= 1"),
        ({"partitions": "0"}, "'partitions' must be an integer from 1 to 1024"),
        ({"removeOnCommit": "maybe"}, "'removeOnCommit' must be true or false"),
        ({"connectTimeout": "-1"}, "'connectTimeout' must be a number of seconds > 0"),
        ({"connectTimeout": "nan"}, "'connectTimeout' must be a number of seconds > 0"),
        ({"maxMessagePerTrigger": "5"}, "did you mean 'maxMessagesPerTrigger'"),
        ({"remove_on_commit": "true"}, "did you mean 'removeOnCommit'"),
    ],
)
def test_options_errors_say_what_is_wrong(given: dict[str, str], message: str) -> None:
    options = given if "endpoint" in given or not given else {"endpoint": "h:1", **given}
    with pytest.raises(DataSourceError, match=r"^qmgr data source: ") as info:
        Options.parse(options)
    assert message in str(info.value)


def test_options_for_a_secured_queue_manager() -> None:
    options = Options.parse(
        {"endpoint": "qm:1802", "TOKEN": "t0k3n", "tlsCa": "/etc/qmgr/ca.crt", "tlscert": "c.crt"}
    )
    assert (options.token, options.tls_ca, options.tls_cert, options.tls_key) == (
        "t0k3n",
        "/etc/qmgr/ca.crt",
        "c.crt",
        None,
    )
    assert "t0k3n" not in repr(options)  # a secret stays out of plans and logs
    with pytest.raises(DataSourceError, match="did you mean 'token'"):
        Options.parse({"endpoint": "qm:1802", "tokn": "x"})
    missing = Options.parse({"endpoint": "127.0.0.1:1", "tlsCa": "/nonexistent/ca.crt"})
    with pytest.raises(DataSourceError, match="'tlsCa', 'tlsCert' and 'tlsKey'"):
        missing.connect()


def test_require_queue() -> None:
    options = Options.parse({"endpoint": "127.0.0.1:1802"})
    with pytest.raises(DataSourceError, match="the option 'queue' is required to read"):
        options.require_queue("to read")


def test_unreachable_endpoint_is_a_clear_error() -> None:
    from helpers import free_port

    options = Options.parse({"endpoint": f"127.0.0.1:{free_port()}", "connectTimeout": "2"})
    with pytest.raises(DataSourceError, match=r"cannot reach the queue manager at 127\.0\.0\.1:"):
        options.connect()


# ---------------------------------------------------------------- ranges


def covered(ranges: list[tuple[int, int]]) -> list[int]:
    return [i for lo, hi in ranges for i in range(lo + 1, hi + 1)]


@pytest.mark.parametrize(
    ("after", "through", "first", "parts"),
    [(0, 100, 1, 3), (0, 100, 90, 4), (10, 11, 11, 8), (0, 5, None, 2), (7, 1000, 500, 1)],
)
def test_split_range_covers_exactly_the_range(
    after: int, through: int, first: int | None, parts: int
) -> None:
    ranges = split_range(after, through, first, parts)
    assert covered(ranges) == list(range(after + 1, through + 1))
    assert len(ranges) <= parts
    if first is not None and parts > 1 and through - first >= parts:
        # From the first visible message on, the ranges are of about equal width.
        widths = [hi - max(lo, first - 1) for lo, hi in ranges]
        assert max(widths) - min(widths) <= 1


def test_split_empty_range() -> None:
    assert split_range(5, 5, None, 4) == [(5, 5)]


# ---------------------------------------------------------------- Arrow


def message(lookup_id: int, **fields: object) -> Message:
    props = MessageProperties(**fields)  # type: ignore[arg-type]
    arrived = dt.datetime(2026, 1, 2, 3, 4, 5, 678000, tzinfo=dt.UTC)
    return Message(queue="orders", lookup_id=lookup_id, arrived_time=arrived, properties=props)


def test_messages_to_batch_has_the_schema_and_values() -> None:
    guid = uuid.uuid4()
    correlation = guid.bytes + (7).to_bytes(4, "little")
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
        {"label": "a", "correlation_id": guid.bytes + (12).to_bytes(4, "little"),
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


# ---------------------------------------------------------------- xids


def test_batch_of_xid() -> None:
    assert _batch_of("spark:6f1c:17:3:abcdef") == 17
    assert _batch_of("spark:6f1c") == -1


def test_query_id_from_checkpoint(tmp_path: object) -> None:
    from pathlib import Path

    directory = Path(str(tmp_path))
    assert query_id_from_checkpoint(str(directory)) is None
    (directory / "metadata").write_text('{"id":"6f1c-query"}', encoding="utf-8")
    assert query_id_from_checkpoint(str(directory)) == "6f1c-query"
    assert query_id_from_checkpoint(f"file://{directory}") == "6f1c-query"
    assert query_id_from_checkpoint("hdfs://nn/ckpt") is None
