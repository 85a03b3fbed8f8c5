"""A page of ``peek_range`` as an Arrow record batch, built from the frame's bytes.

The SDK's ``peek_range`` makes a ``Message`` (and its ``MessageProperties``)
per message, which a reader that only wants columns does not need: here one
walk over the ``MessageList`` body (``qmgr.client._pages``) unpacks each
message's fixed part once and notes where its label and body are; the
columns are then built at once, the bodies and labels as Arrow buffers
joined from slices of the frame. The result is the same record batch that
``messages_to_batch`` makes from ``Message`` objects (the tests compare
them).

Layout (``wire/client/fast_codec.py`` and ``wire/message_layout.py``): a ``u32``
count, then per message ``<QdH`` (lookup id, arrival time, queue name
length), the queue name, and the encoded message: an 84-byte fixed part
``<16sIIBBBBBxHIId20sHHHHII`` followed by the label, admin queue, response
queue, destination, extension and body. A version 4 queue manager follows the
last message with a trailer of one 16-byte counters record per message.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Final

from wire import format_message_id

from ._arrow import COLUMNS, arrow_schema, correlation_text
from ._options import DataSourceError

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = ["Page", "decode_page"]

_COUNT = struct.Struct("<I")
_QUEUED = struct.Struct("<QdH")
_FIXED = struct.Struct("<16sIIBBBBBxHIId20sHHHHII")
_FIXED_SIZE: Final = _FIXED.size
#: A record of the counters trailer: abort count u32, move count u32, last move time f64.
_COUNTERS_SIZE: Final = 16
_FLAG_CORRELATION: Final = 0x02
# Fields of the fixed part, by index.
_SOURCE_QM, _ORDINAL, _APP_SPECIFIC, _PRIORITY, _FLAGS, _CLASS = 0, 1, 2, 3, 7, 8
_SENT_TIME, _CORRELATION, _LABEL_LEN, _BODY_LEN = 11, 12, 13, 18
_SOURCE_TEXT: dict[bytes, str] = {}


class Page:
    """What :func:`decode_page` found; :meth:`batch` makes the record batch.

    Attributes:
        count: messages in the page, ``through`` or not.
        last: the lookup id of the page's last message (0 if it has none).
        body_bytes: the sum of the page's body sizes.
        beyond: True if the page has messages above ``through``.
    """

    __slots__ = (
        "_arrived",
        "_bodies",
        "_body",
        "_fixed",
        "_labels",
        "_lookups",
        "_queue_span",
        "beyond",
        "body_bytes",
        "count",
        "last",
    )

    def __init__(self, body: bytes) -> None:
        self._body = body
        self._lookups: list[int] = []
        self._arrived: list[float] = []
        self._fixed: list[tuple[Any, ...]] = []
        self._labels: list[tuple[int, int]] = []
        self._bodies: list[tuple[int, int]] = []
        self._queue_span = (0, 0)
        self.count = self.last = self.body_bytes = 0
        self.beyond = False

    def batch(self, columns: Sequence[str] = COLUMNS) -> pa.RecordBatch | None:
        """The messages with ``lookup_id <= through`` as a record batch (None if there are none)."""
        return _batch(
            self._body,
            columns,
            self._lookups,
            self._arrived,
            self._fixed,
            self._labels,
            self._bodies,
            self._queue_span,
        )


def _malformed(detail: str) -> DataSourceError:
    return DataSourceError(f"the queue manager sent a malformed page of messages: {detail}")


def _source_text(raw: bytes) -> str:
    text = _SOURCE_TEXT.get(raw)
    if text is None:
        if len(_SOURCE_TEXT) > 256:
            _SOURCE_TEXT.clear()
        text = _SOURCE_TEXT[raw] = str(uuid.UUID(bytes=raw))
    return text


def decode_page(body: bytes, through: int) -> Page:
    """Walk a MessageList body; the messages with ``lookup_id <= through`` go in the batch.

    Raises:
        DataSourceError: the bytes are not a well-formed MessageList.
    """
    page = Page(body)
    lookups, arrived, fixed = page._lookups, page._arrived, page._fixed
    labels, bodies = page._labels, page._bodies
    size = len(body)
    pos = 4
    try:
        (count,) = _COUNT.unpack_from(body, 0)
        last = total = 0
        beyond = False
        unpack_queued, unpack_fixed = _QUEUED.unpack_from, _FIXED.unpack_from
        for _ in range(count):
            lookup_id, arrival, name_size = unpack_queued(body, pos)
            start = pos + 18 + name_size
            values = unpack_fixed(body, start)
            label_start = start + _FIXED_SIZE
            label_end = label_start + values[_LABEL_LEN]
            end = label_end + sum(values[14:19])
            if end > size:
                msg = f"message at byte {pos} runs past the end"
                raise _malformed(msg)
            total += values[_BODY_LEN]
            last = lookup_id
            if lookup_id > through:
                beyond = True
            elif not beyond:
                if not lookups:
                    page._queue_span = (pos + 18, start)
                lookups.append(lookup_id)
                arrived.append(arrival)
                fixed.append(values)
                labels.append((label_start, label_end))
                bodies.append((end - values[_BODY_LEN], end))
            pos = end
    except struct.error as exc:
        raise _malformed(str(exc)) from None
    # A version 4 queue manager adds one counters record per message after the
    # last one (``wire/client/poison.py``); the columns do not use them.
    if pos != size and size - pos != count * _COUNTERS_SIZE:
        msg = f"{size - pos} unexpected trailing bytes"
        raise _malformed(msg)
    page.count, page.last, page.body_bytes, page.beyond = count, last, total, beyond
    return page


def _buffers_array(body: bytes, spans: list[tuple[int, int]], kind: pa.DataType) -> pa.Array:
    """A binary or string array of the slices ``spans`` of ``body``, joined in one buffer."""
    import numpy as np
    import pyarrow as pa

    view = memoryview(body)
    data = b"".join([view[a:b] for a, b in spans])
    offsets = np.zeros(len(spans) + 1, dtype=np.int32)
    np.cumsum([b - a for a, b in spans], out=offsets[1:])
    array = pa.Array.from_buffers(
        kind, len(spans), [None, pa.py_buffer(offsets), pa.py_buffer(data)]
    )
    if kind == pa.string():
        try:
            array.validate(full=True)
        except pa.ArrowInvalid:
            msg = "a label is not UTF-8"
            raise _malformed(msg) from None
    return array


def _micros(seconds: Sequence[float], *, rounded: bool) -> Any:
    """Unix seconds as integer microseconds: rounded half to even as ``datetime`` does, or cut."""
    import numpy as np

    values = np.asarray(seconds, dtype=np.float64)
    if not rounded:
        return (values * 1_000_000.0).astype(np.int64)
    fraction, whole = np.modf(values)
    return whole.astype(np.int64) * 1_000_000 + np.rint(fraction * 1_000_000.0).astype(np.int64)


def _batch(
    body: bytes,
    columns: Sequence[str],
    lookups: list[int],
    arrived: list[float],
    fixed: list[tuple[Any, ...]],
    labels: list[tuple[int, int]],
    bodies: list[tuple[int, int]],
    queue_span: tuple[int, int],
) -> pa.RecordBatch | None:
    import pyarrow as pa

    if not lookups:
        return None
    schema = arrow_schema(columns)
    fields = list(zip(*fixed, strict=True))
    arrays = []
    for name in schema.names:
        kind = schema.field(name).type
        if name == "lookup_id":
            array = pa.array(lookups, kind)
        elif name == "id":
            pairs = zip(fields[_SOURCE_QM], fields[_ORDINAL], strict=True)
            ids = [format_message_id(guid, ordinal) for guid, ordinal in pairs]
            array = pa.array(ids, kind)
        elif name == "label":
            array = _buffers_array(body, labels, kind)
        elif name == "body":
            array = _buffers_array(body, bodies, kind)
        elif name == "correlation_id":
            texts = [
                correlation_text(raw) if flags & _FLAG_CORRELATION else None
                for raw, flags in zip(fields[_CORRELATION], fields[_FLAGS], strict=True)
            ]
            array = pa.array(texts, kind)
        elif name == "app_specific":
            array = pa.array(fields[_APP_SPECIFIC], kind)
        elif name == "priority":
            array = pa.array(fields[_PRIORITY], kind)
        elif name == "message_class":
            array = pa.array(fields[_CLASS], kind)
        elif name == "sent_time":
            array = pa.array(_micros(fields[_SENT_TIME], rounded=False), pa.int64()).cast(kind)
        elif name == "arrived_time":
            array = pa.array(_micros(arrived, rounded=True), pa.int64()).cast(kind)
        elif name == "source_qm":
            array = pa.array([_source_text(raw) for raw in fields[_SOURCE_QM]], kind)
        else:
            try:
                queue = str(body[queue_span[0] : queue_span[1]], "utf-8")
            except UnicodeDecodeError:
                msg = "a queue name is not UTF-8"
                raise _malformed(msg) from None
            array = pa.array([queue] * len(lookups), kind)
        arrays.append(array)
    return pa.RecordBatch.from_arrays(arrays, schema=schema)
