"""Hand-written encoders and decoders for the client protocol's hot frames.

Every message travels in a ``Send`` (client to daemon) or a ``Message`` /
``MessageList`` (daemon to client), and every transaction is framed by
``Begin``, ``Commit`` and their ``Ok``, and a send outside a transaction is
answered ``Sent``; these are packed and unpacked here
with precompiled ``struct`` formats instead of construct containers. The
construct layouts of :mod:`wire.client.layouts` stay the definition: tests check,
on generated values, that both produce the same bytes and reject the same
malformed input.

Besides value-to-bytes functions, this module has the byte-level helpers
the two ends use on their hot paths: :func:`append_send_frame` packs a Send
frame from a message's parts straight into an output buffer, and
:func:`encode_message_reply` builds a Message frame around a stored message
without decoding it.
"""

from __future__ import annotations

import dataclasses
import struct
from collections.abc import Callable, Sequence
from typing import Any, Final

from ..message_properties import MessageProperties
from ..protocol_errors import LocalProtocolError, RemoteProtocolError
from .constants import FrameKind
from .frames import FrameValue
from .poison import MessageCounters
from .values import (
    Abort,
    Begin,
    Commit,
    MessageList,
    MessageReply,
    Ok,
    QueuedMessage,
    Receive,
    Send,
    Sent,
)

HEADER = struct.Struct("<IHHI")
_U16 = struct.Struct("<H")
_U32 = struct.Struct("<I")
_U64 = struct.Struct("<Q")
_SEND_HEAD = struct.Struct("<IHHIQB")  # frame header, tx_id, mode
_SEND_TX_MODE = struct.Struct("<QB")  # tx_id, mode
_SEND_PREFIX: Final = _SEND_HEAD.size - HEADER.size
_QUEUED_HEAD = struct.Struct("<QdH")  # lookup_id, arrived_time, queue name length
#: A version 5 trailer's record of a message's counters (see :mod:`wire.client.poison`).
_COUNTERS = struct.Struct("<IId")  # abort_count, move_count, last_move_time
_RECEIVE_TAIL = struct.Struct("<IBQ")
_OK_FRAME = struct.Struct("<IHHIQ")
_SEND_KIND: Final = int(FrameKind.SEND)
_MESSAGE_KIND: Final = int(FrameKind.MESSAGE)


def _malformed(detail: str, *, field: str) -> RemoteProtocolError:
    return RemoteProtocolError(f"malformed: {detail}", field=field)


def _read_text(body: bytes | memoryview, pos: int, what: str) -> tuple[str, int]:
    if pos + 2 > len(body):
        msg = f"string length runs past the end at byte {pos}"
        raise _malformed(msg, field=what)
    (length,) = _U16.unpack_from(body, pos)
    end = pos + 2 + length
    if end > len(body):
        msg = f"string of {length} bytes runs past the end at byte {pos}"
        raise _malformed(msg, field=what)
    try:
        return str(body[pos + 2 : end], "utf-8"), end
    except UnicodeDecodeError as exc:
        msg = f"string at byte {pos} is not UTF-8"
        raise _malformed(msg, field=what) from exc


# --------------------------------------------------------------------------
# Send
# --------------------------------------------------------------------------


def append_send_frame(
    out: bytearray,
    request_id: int,
    tx_id: int,
    mode: int,
    parts: Sequence[bytes | bytearray | memoryview],
) -> None:
    """Append a Send frame carrying the message made of ``parts`` to ``out``.

    ``parts`` is what ``encode_message_parts`` returned. Nothing is appended
    if it raises.

    Raises:
        struct.error: the request id, transaction id or mode is out of range.
        OverflowError: the frame would exceed ``MAX_FRAME_BODY`` (checked by the caller).
    """
    size = _SEND_PREFIX + sum(len(part) for part in parts)
    start = len(out)
    try:
        out += _SEND_HEAD.pack(size, _SEND_KIND, 0, request_id, tx_id, mode)
        for part in parts:
            out += part
    except BaseException:
        del out[start:]  # never leave part of a frame behind
        raise


def _encode_send(value: Send) -> bytes:
    return b"".join((_SEND_TX_MODE.pack(value.tx_id, value.mode), value.message.raw))


def _decode_send(body: bytes) -> Send:
    if len(body) < 9:
        msg = f"{len(body)} bytes is shorter than the fixed part"
        raise _malformed(msg, field="Send")
    (tx_id,) = _U64.unpack_from(body, 0)
    try:
        message = MessageProperties.from_bytes(memoryview(body)[9:])
    except RemoteProtocolError as exc:
        detail = f"{exc.field}: {exc.message}"
        raise _malformed(detail, field="Send") from exc
    return Send(tx_id=tx_id, mode=body[8], message=message)


# --------------------------------------------------------------------------
# Message, MessageList
# --------------------------------------------------------------------------


def encode_message_reply(
    request_id: int,
    queue: str,
    lookup_id: int,
    arrived_time: float,
    message: bytes | memoryview,
    counters: MessageCounters | None = None,
) -> bytes:
    """A whole Message frame around an encoded message (stored bytes, not decoded),
    with the version 4 trailer of its ``counters`` if they are given.

    Raises:
        struct.error, UnicodeEncodeError: a value is out of range.
    """
    name = queue.encode("utf-8")
    head = _QUEUED_HEAD.pack(lookup_id, arrived_time, len(name))
    tail = b"" if counters is None else counters_record(counters)
    size = len(head) + len(name) + len(message) + len(tail)
    return b"".join((HEADER.pack(size, _MESSAGE_KIND, 0, request_id), head, name, message, tail))


def counters_record(counters: MessageCounters) -> bytes:
    """One record of a version 4 counters trailer (a MessageList's: one per message,
    in order, after the last one).

    Raises:
        struct.error: a counter is out of range.
    """
    return _COUNTERS.pack(counters.abort_count, counters.move_count, counters.last_move_time)


def _counters_at(body: bytes, pos: int) -> MessageCounters:
    abort_count, move_count, last_move_time = _COUNTERS.unpack_from(body, pos)
    return MessageCounters(
        abort_count=abort_count, move_count=move_count, last_move_time=last_move_time
    )


def queued_message_parts(
    queue_name: bytes, lookup_id: int, arrived_time: float, message: bytes | memoryview
) -> tuple[bytes, bytes, bytes | memoryview]:
    """One entry of a MessageList body, as parts to join (the message is not copied)."""
    return _QUEUED_HEAD.pack(lookup_id, arrived_time, len(queue_name)), queue_name, message


def _encode_queued(value: QueuedMessage) -> bytes:
    name = value.queue.encode("utf-8")
    return b"".join(
        queued_message_parts(name, value.lookup_id, value.arrived_time, value.message.raw)
    )


def _decode_queued(body: bytes, pos: int, what: str) -> tuple[QueuedMessage, int]:
    if len(body) - pos < _QUEUED_HEAD.size:
        msg = f"message at byte {pos} is shorter than its fixed part"
        raise _malformed(msg, field=what)
    lookup_id, arrived_time, _ = _QUEUED_HEAD.unpack_from(body, pos)
    queue, pos = _read_text(body, pos + _QUEUED_HEAD.size - 2, what)
    end = pos + MessageProperties.size_at(body, pos)
    if end > len(body):
        msg = f"message at byte {pos} runs past the end"
        raise _malformed(msg, field=what)
    message = MessageProperties.from_bytes(memoryview(body)[pos:end])
    return (
        QueuedMessage(queue=queue, lookup_id=lookup_id, arrived_time=arrived_time, message=message),
        end,
    )


def _decode_message_reply(body: bytes) -> MessageReply:
    message, end = _decode_queued(body, 0, "MessageReply")
    rest = len(body) - end
    if rest == _COUNTERS.size:
        message = dataclasses.replace(message, counters=_counters_at(body, end))
    elif rest:
        msg = f"{len(body) - end} unexpected trailing bytes"
        raise _malformed(msg, field="MessageReply")
    return MessageReply(message=message)


def _encode_message_reply(value: MessageReply) -> bytes:
    message = value.message
    counters = message.counters
    entry = _encode_queued(message)
    return entry if counters is None else entry + counters_record(counters)


def _encode_message_list(value: MessageList) -> bytes:
    messages = value.messages
    body = _U32.pack(len(messages)) + b"".join(_encode_queued(m) for m in messages)
    counters = [m.counters for m in messages if m.counters is not None]
    if not counters:
        return body
    if len(counters) != len(messages):
        msg = "every QueuedMessage or none must carry its version 4 values"
        raise LocalProtocolError(msg, field="QueuedMessage")
    return body + b"".join(counters_record(found) for found in counters)


def _decode_message_list(body: bytes) -> MessageList:
    if len(body) < 4:
        msg = "no message count"
        raise _malformed(msg, field="MessageList")
    (count,) = _U32.unpack_from(body, 0)
    pos, messages = 4, []
    for _ in range(count):
        message, pos = _decode_queued(body, pos, "MessageList")
        messages.append(message)
    rest = len(body) - pos
    if rest and rest == count * _COUNTERS.size:
        messages = [
            dataclasses.replace(message, counters=_counters_at(body, pos + i * _COUNTERS.size))
            for i, message in enumerate(messages)
        ]
    elif rest:
        msg = f"{len(body) - pos} unexpected trailing bytes"
        raise _malformed(msg, field="MessageList")
    return MessageList(messages=tuple(messages))


# --------------------------------------------------------------------------
# Receive, and the frames whose body is one u64
# --------------------------------------------------------------------------


def _encode_receive(value: Receive) -> bytes:
    queue = value.queue.encode("utf-8")
    return b"".join(
        (
            _U64.pack(value.tx_id),
            _U16.pack(len(queue)),
            queue,
            _RECEIVE_TAIL.pack(value.timeout_ms, 1 if value.peek else 0, value.lookup_id),
        )
    )


def _decode_receive(body: bytes) -> Receive:
    if len(body) < _U64.size:
        msg = f"{len(body)} bytes is shorter than the fixed part"
        raise _malformed(msg, field="Receive")
    (tx_id,) = _U64.unpack_from(body, 0)
    queue, pos = _read_text(body, _U64.size, "Receive")
    if len(body) - pos != _RECEIVE_TAIL.size:
        msg = f"{len(body) - pos} bytes after the queue name, expected 13"
        raise _malformed(msg, field="Receive")
    timeout_ms, peek, lookup_id = _RECEIVE_TAIL.unpack_from(body, pos)
    return Receive(
        tx_id=tx_id, queue=queue, timeout_ms=timeout_ms, peek=bool(peek), lookup_id=lookup_id
    )


def _encode_sent(value: Sent) -> bytes:
    message_id = value.message_id.encode("utf-8")
    queue = value.queue.encode("utf-8")
    return b"".join(
        (
            _U16.pack(len(message_id)),
            message_id,
            _U16.pack(len(queue)),
            queue,
            _U64.pack(value.lookup_id),
        )
    )


def _decode_sent(body: bytes) -> Sent:
    message_id, pos = _read_text(body, 0, "Sent")
    queue, pos = _read_text(body, pos, "Sent")
    if len(body) - pos != _U64.size:
        msg = f"{len(body) - pos} bytes after the queue name, expected 8"
        raise _malformed(msg, field="Sent")
    (lookup_id,) = _U64.unpack_from(body, pos)
    return Sent(message_id=message_id, queue=queue, lookup_id=lookup_id)


def _u64_decoder(cls: type[Any], name: str) -> Callable[[bytes], Any]:
    what = cls.__name__

    def decode(body: bytes) -> Any:
        if len(body) != _U64.size:
            msg = f"{len(body)} bytes, expected {_U64.size}"
            raise _malformed(msg, field=what)
        return cls(**{name: _U64.unpack(body)[0]})

    return decode


def encode_ok(request_id: int, value: int = 0) -> bytes:
    """A whole ``Ok(value)`` frame: the same bytes as ``encode_frame``, faster.

    Raises:
        struct.error: the request id or the value is out of range.
    """
    return _OK_FRAME.pack(_U64.size, FrameKind.OK, 0, request_id, value)


def encode_tx_request(kind: FrameKind, request_id: int, tx_id: int) -> bytes:
    """A whole Begin, Commit or Abort frame (each carries only the transaction id).

    Raises:
        struct.error: the request id or the transaction id is out of range.
    """
    return _OK_FRAME.pack(_U64.size, kind, 0, request_id, tx_id)


#: Body encoders of the hot frames, by value class.
FAST_ENCODE: Final[dict[type[Any], Callable[[Any], bytes]]] = {
    Ok: lambda value: _U64.pack(value.value),
    Begin: lambda value: _U64.pack(value.tx_id),
    Commit: lambda value: _U64.pack(value.tx_id),
    Abort: lambda value: _U64.pack(value.tx_id),
    Receive: _encode_receive,
    Send: _encode_send,
    MessageReply: _encode_message_reply,
    MessageList: _encode_message_list,
    Sent: _encode_sent,
}
#: Body decoders of the hot frames, by kind.
FAST_DECODE: Final[dict[FrameKind, Callable[[bytes], FrameValue]]] = {
    FrameKind.OK: _u64_decoder(Ok, "value"),
    FrameKind.BEGIN: _u64_decoder(Begin, "tx_id"),
    FrameKind.COMMIT: _u64_decoder(Commit, "tx_id"),
    FrameKind.ABORT: _u64_decoder(Abort, "tx_id"),
    FrameKind.RECEIVE: _decode_receive,
    FrameKind.SEND: _decode_send,
    FrameKind.MESSAGE: _decode_message_reply,
    FrameKind.MESSAGE_LIST: _decode_message_list,
    FrameKind.SENT: _decode_sent,
}
