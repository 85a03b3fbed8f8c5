"""The client's hot paths: appending ``Send`` frames and reading replies.

A transaction of a hundred sends costs a hundred ``Send`` frames out and a
hundred ``Ok`` replies in, so both are done here with precompiled structs and
no intermediate objects:

* :func:`append_send` packs a ``Send`` frame straight into the connection's
  output buffer. It produces exactly the bytes of
  ``wire.client_frames.encode_frame(request_id, Send(...))`` (a unit test
  checks this on generated values); a value it cannot pack is handed to
  ``encode_frame`` so that the error is the protocol module's own.
* :class:`ReplyReader` splits the incoming byte stream into frames. The
  20-byte ``Ok`` frame (header and one u64) is read in place; every other
  frame goes, byte for byte, through a ``ClientFrameDecoder``, which checks
  sizes and layouts and builds the typed value.

Replies to pipelined requests (a transaction's Begin and sends) are matched
here against the connection's ``pipelined`` table: an ``Ok`` needs nothing,
an error is recorded on its transaction. Every other reply is handed to the
``deliver`` callback of the protocol core (``_protocol.ClientProtocol``).
"""

from __future__ import annotations

import math
import struct
from collections.abc import Callable
from typing import TYPE_CHECKING, Final

from wire import LocalProtocolError
from wire import client_frames as cf

from ._errors import InvalidArgument, MessageTooLarge

if TYPE_CHECKING:
    from ._protocol import TransactionState

_INFINITE: Final = 0xFFFFFFFF
_OK: Final = int(cf.FrameKind.OK)
_SEND: Final = int(cf.FrameKind.SEND)
_ERROR: Final = int(cf.FrameKind.ERROR)
_HEADER = struct.Struct("<IHHI")
_HEADER_SIZE: Final = _HEADER.size
_OK_SIZE: Final = _HEADER_SIZE + 8
_U64 = struct.Struct("<Q")
# Frame header, then the Send body's fixed part (tx_id, mode, app_specific,
# priority, delivery, acknowledge, journal, time_to_reach_queue,
# time_to_be_received), then the destination's length.
_SEND_HEAD = struct.Struct("<IHHIQBIBBBBIIH")
# Bytes of a Send body besides its variable fields: the fixed part, four
# string lengths, the correlation id's length and the body's length.
_SEND_FIXED: Final = _SEND_HEAD.size - _HEADER_SIZE + 3 * 2 + 1 + 4
_U16 = struct.Struct("<H")
_U8 = struct.Struct("<B")
_U32 = struct.Struct("<I")
# label, admin queue and response queue empty, no correlation id
_EMPTY_MIDDLE: Final = b"\x00" * 7
_DELIVERY: Final = {"recoverable": 1, "express": 0, "RECOVERABLE": 1, "EXPRESS": 0}

Deliver = Callable[[int, cf.FrameValue], None]


def _seconds(value: float | None, name: str) -> int:
    if value is None:
        return _INFINITE
    if value != value or value < 0:  # NaN or negative
        msg = f"{name} must be None (no limit) or a number of seconds >= 0, not {value!r}"
        raise InvalidArgument(msg)
    return min(math.ceil(value), _INFINITE - 1)


def append_send(
    out: bytearray,
    request_id: int,
    tx_id: int,
    mode: int,
    destination: str,
    body: bytes | bytearray | memoryview | str,
    label: str,
    correlation_id: bytes | None,
    app_specific: int,
    priority: int,
    delivery: str | int,
    acknowledge: int,
    journal: int,
    admin_queue: str,
    response_queue: str,
    time_to_reach_queue: float | None,
    time_to_be_received: float | None,
) -> None:
    """Append one ``Send`` frame to ``out`` (nothing is appended if it raises).

    Raises:
        MessageTooLarge: the body is over 4 MB.
        InvalidArgument: a value cannot be sent (out of range, wrong type),
            with the field named.
    """
    if isinstance(body, str):
        body = body.encode("utf-8")
    if len(body) > cf.MAX_MESSAGE_BODY:
        msg = f"message body is {len(body)} bytes; the limit is {cf.MAX_MESSAGE_BODY} (4 MB)"
        raise MessageTooLarge(msg)
    if isinstance(delivery, str):
        code = _DELIVERY.get(delivery)
        if code is None:
            code = _DELIVERY.get(delivery.lower())
            if code is None:
                msg = f"delivery must be 'recoverable' or 'express', not {delivery!r}"
                raise InvalidArgument(msg)
        delivery = code
    ttrq = (
        _INFINITE
        if time_to_reach_queue is None
        else _seconds(time_to_reach_queue, "time_to_reach_queue")
    )
    ttbr = (
        _INFINITE
        if time_to_be_received is None
        else _seconds(time_to_be_received, "time_to_be_received")
    )
    correlation = b"" if correlation_id is None else correlation_id
    try:
        dest = destination.encode("utf-8")
        if not (label or admin_queue or response_queue or correlation):
            length = _SEND_FIXED + len(dest) + len(body)
            head = _SEND_HEAD.pack(
                length, _SEND, 0, request_id, tx_id, mode, app_specific, priority,
                delivery, acknowledge, journal, ttrq, ttbr, len(dest),
            )  # fmt: skip
            tail = _U32.pack(len(body))
            if length > cf.MAX_FRAME_BODY:
                raise OverflowError  # noqa: TRY301 - the slow path below says why
            out += head
            out += dest
            out += _EMPTY_MIDDLE
            out += tail
            out += body
            return
        label_b = label.encode("utf-8")
        admin = admin_queue.encode("utf-8")
        response = response_queue.encode("utf-8")
        length = (
            _SEND_FIXED
            + len(dest)
            + len(label_b)
            + len(admin)
            + len(response)
            + len(correlation)
            + len(body)
        )
        parts = (
            _SEND_HEAD.pack(
                length, _SEND, 0, request_id, tx_id, mode, app_specific, priority,
                delivery, acknowledge, journal, ttrq, ttbr, len(dest),
            ),
            dest,
            _U16.pack(len(label_b)),
            label_b,
            _U16.pack(len(admin)),
            admin,
            _U16.pack(len(response)),
            response,
            _U8.pack(len(correlation)),
            bytes(correlation),
            _U32.pack(len(body)),
        )  # fmt: skip
        if length > cf.MAX_FRAME_BODY:
            raise OverflowError  # noqa: TRY301 - the slow path below says why
    except (struct.error, OverflowError, UnicodeError, TypeError, AttributeError):
        out += _encode_slowly(
            request_id, tx_id, mode, destination, body, label, correlation, app_specific,
            priority, delivery, acknowledge, journal, admin_queue, response_queue, ttrq, ttbr,
        )  # fmt: skip
        return
    for part in parts:
        out += part
    out += body


def _encode_slowly(
    request_id: int,
    tx_id: int,
    mode: int,
    destination: str,
    body: bytes | bytearray | memoryview,
    label: str,
    correlation: bytes | bytearray | memoryview,
    app_specific: int,
    priority: int,
    delivery: int,
    acknowledge: int,
    journal: int,
    admin_queue: str,
    response_queue: str,
    ttrq: int,
    ttbr: int,
) -> bytes:
    try:
        value = cf.Send(
            tx_id=tx_id,
            mode=mode,
            destination=destination,
            body=bytes(body),
            label=label,
            correlation_id=bytes(correlation),
            app_specific=app_specific,
            priority=priority,
            delivery=delivery,
            acknowledge=acknowledge,
            journal=journal,
            admin_queue=admin_queue,
            response_queue=response_queue,
            time_to_reach_queue=ttrq,
            time_to_be_received=ttbr,
        )
        return cf.encode_frame(request_id, value)
    except (LocalProtocolError, TypeError, ValueError) as exc:
        msg = f"cannot send this message: {exc}"
        raise InvalidArgument(msg) from None


_TX_REQUEST = struct.Struct("<IHHIQ")
#: The requests that carry only a transaction id.
BEGIN: Final = int(cf.FrameKind.BEGIN)
COMMIT: Final = int(cf.FrameKind.COMMIT)
ABORT: Final = int(cf.FrameKind.ABORT)
_RECEIVE: Final = int(cf.FrameKind.RECEIVE)
# Receive: header, tx_id, queue length; then the queue; then timeout, peek, lookup id.
_RECEIVE_HEAD = struct.Struct("<IHHIQH")
_RECEIVE_TAIL = struct.Struct("<IBQ")
_RECEIVE_FIXED: Final = _RECEIVE_HEAD.size - _HEADER_SIZE + _RECEIVE_TAIL.size


def append_tx_request(out: bytearray, kind: int, request_id: int, tx_id: int) -> None:
    """Append a Begin, Commit or Abort frame (each carries only the transaction id)."""
    out += _TX_REQUEST.pack(8, kind, 0, request_id, tx_id)


def append_receive(
    out: bytearray,
    request_id: int,
    tx_id: int,
    queue: str,
    timeout_ms: int,
    peek: bool,
    lookup_id: int | None,
) -> None:
    """Append a Receive frame (a receive or a peek).

    Raises:
        InvalidArgument: a value cannot be sent (a queue name too long, a
            lookup id out of range, ...).
    """
    lookup = 0 if lookup_id is None else lookup_id
    try:
        name = queue.encode("utf-8")
        head = _RECEIVE_HEAD.pack(
            _RECEIVE_FIXED + len(name), _RECEIVE, 0, request_id, tx_id, len(name)
        )
        tail = _RECEIVE_TAIL.pack(timeout_ms, 1 if peek else 0, lookup)
    except (struct.error, UnicodeError, TypeError, AttributeError):
        request = cf.Receive(
            tx_id=tx_id, queue=queue, timeout_ms=timeout_ms, peek=peek, lookup_id=lookup
        )
        try:
            out += cf.encode_frame(request_id, request)
        except (LocalProtocolError, TypeError, ValueError) as exc:
            msg = f"cannot send this request: {exc}"
            raise InvalidArgument(msg) from None
        return
    out += head
    out += name
    out += tail


class ReplyReader:
    """Splits the daemon's byte stream into replies and routes them.

    Args:
        pipelined: request id -> transaction, for requests whose reply only
            matters if it is an error; entries are removed as replies arrive.
        deliver: called with (request id, value) for every other reply.
    """

    __slots__ = ("_decoder", "_deliver", "_in_decoder", "_pipelined", "_rest")

    def __init__(self, pipelined: dict[int, TransactionState], deliver: Deliver) -> None:
        self._decoder = cf.ClientFrameDecoder()
        self._pipelined = pipelined
        self._deliver = deliver
        self._rest = b""
        # Bytes of the frame being handed to the decoder that have not arrived yet.
        self._in_decoder = 0

    def feed(self, data: bytes | bytearray | memoryview) -> None:
        """Process received bytes; call ``deliver`` for every whole reply.

        Raises:
            RemoteProtocolError: the bytes are not valid frames (the
                connection must be closed).
        """
        view = memoryview(data)
        if self._in_decoder:
            take = min(self._in_decoder, len(view))
            self._decoder.receive_data(view[:take])
            self._in_decoder -= take
            view = view[take:]
            if self._in_decoder:
                return
            self._route_decoded()
        if self._rest:
            buffer: bytes | memoryview = self._rest + view
            self._rest = b""
        else:
            buffer = view
        end = len(buffer)
        pos = 0
        pipelined = self._pipelined
        unpack_header = _HEADER.unpack_from
        while end - pos >= _HEADER_SIZE:
            length, kind, flags, request_id = unpack_header(buffer, pos)
            if kind == _OK and length == 8 and not flags:
                if end - pos < _OK_SIZE:
                    break
                if pipelined.pop(request_id, None) is None:
                    (value,) = _U64.unpack_from(buffer, pos + _HEADER_SIZE)
                    self._deliver(request_id, cf.Ok(value=value))
                pos += _OK_SIZE
                continue
            # Any other frame: through the decoder, which checks it.
            size = _HEADER_SIZE + length
            take = min(size, end - pos)
            self._decoder.receive_data(buffer[pos : pos + take])
            pos += take
            if take < size:
                self._in_decoder = size - take
                self._decoder.next_frame()  # raises now if the header is bad
                return
            self._route_decoded()
        if pos < end:
            self._rest = bytes(buffer[pos:end])

    def _route_decoded(self) -> None:
        frame = self._decoder.next_frame()
        if frame is None:  # pragma: no cover - a whole frame was fed
            msg = "internal error: a whole frame did not decode"
            raise AssertionError(msg)
        value = frame.value
        tx = self._pipelined.pop(frame.request_id, None)
        if tx is None:
            self._deliver(frame.request_id, value)
        elif type(value) is cf.ErrorReply:
            tx.fail(value.code, value.message)
