"""The client's hot paths: packing requests and splitting the reply stream.

* :func:`append_send` converts what a caller passes to ``send()`` (a str
  body, ``"express"``, seconds as floats, ``None`` for "no limit") and packs
  the Send frame straight into the connection's output buffer, using the
  message layout of ``wire.MessageProperties``: the body is copied once.
* :class:`ReplyReader` splits the incoming byte stream into frames. The
  20-byte ``Ok`` frame (header and one u64) is read in place; every other
  frame goes, byte for byte, through a ``ClientFrameDecoder``, which checks
  sizes and layouts and builds the typed value. Every reply is handed to the
  ``deliver`` callback of the protocol core.
* :func:`check_range` is the one check of an integer argument that goes in
  a fixed-width field: the message properties of a send, and the fields of
  every other request (:data:`REQUEST_RANGES`, checked by
  :func:`append_request`) are refused before encoding, with the argument
  named and its range, instead of the encoder's words.
"""

from __future__ import annotations

import datetime as dt
import decimal
import math
import numbers
import struct
from collections.abc import Callable
from typing import Final, TypedDict

from wire import LocalProtocolError, RemoteProtocolError
from wire import client as cf

from ._exceptions import InvalidArgument, MessageTooLarge

__all__ = [
    "ABORT",
    "BEGIN",
    "COMMIT",
    "RawMessageList",
    "ReplyReader",
    "SendOptions",
    "append_receive",
    "append_request",
    "append_send",
    "append_tx_request",
    "check_range",
]

_INFINITE: Final = 0xFFFFFFFF
_MAX_U8: Final = 0xFF
_MAX_U32: Final = 0xFFFFFFFF
_MAX_U64: Final = 0xFFFFFFFFFFFFFFFF
_OK: Final = int(cf.FrameKind.OK)
_MESSAGE_LIST: Final = int(cf.FrameKind.MESSAGE_LIST)
_HEADER = struct.Struct("<IHHI")
_HEADER_SIZE: Final = _HEADER.size
_OK_SIZE: Final = _HEADER_SIZE + 8
_U64 = struct.Struct("<Q")
_DELIVERY: Final = {"recoverable": 1, "express": 0}

#: The requests that carry only a transaction id.
BEGIN: Final = cf.FrameKind.BEGIN
COMMIT: Final = cf.FrameKind.COMMIT
ABORT: Final = cf.FrameKind.ABORT

Deliver = Callable[[int, cf.FrameValue], None]


class SendOptions(TypedDict, total=False):
    """The message properties ``send()`` takes besides the destination and the body.

    Attributes:
        label: at most 250 characters (to another queue manager: at most 249
            UTF-16 units, and no NUL).
        correlation_id: 20 bytes, or None.
        app_specific: an application-defined 32-bit value.
        priority: 0..7 (ignored by transactional queues). Default 3.
        delivery: ``"recoverable"`` (default) or ``"express"``, or a ``Delivery``.
        acknowledge: MQMSG_ACKNOWLEDGMENT_* bits (needs ``admin_queue``).
        journal: MQMSG_JOURNAL level.
        admin_queue: where acknowledgments go.
        response_queue: where responses should go.
        time_to_reach_queue: seconds (a number or a ``datetime.timedelta``),
            or None (or ``math.inf``) for no limit.
        time_to_be_received: the same.
    """

    label: str
    correlation_id: bytes | None
    app_specific: int
    priority: int
    delivery: str | int
    acknowledge: int
    journal: int
    admin_queue: str
    response_queue: str
    time_to_reach_queue: float | dt.timedelta | None
    time_to_be_received: float | dt.timedelta | None


def _seconds(value: float | dt.timedelta | None, name: str) -> int:
    given: object = value  # what a caller passed, whatever its annotation says
    if isinstance(given, dt.timedelta):
        given = given.total_seconds()
    if given is None:
        return _INFINITE
    seconds = float(given) if isinstance(given, numbers.Real | decimal.Decimal) else math.nan
    if isinstance(given, bool) or seconds != seconds or seconds < 0:  # not a number, or negative
        msg = f"{name} must be None (no limit) or a number of seconds >= 0, not {value!r}"
        raise InvalidArgument(msg)
    if seconds == math.inf:
        return _INFINITE
    return min(math.ceil(seconds), _INFINITE - 1)


def _delivery(value: str | int) -> int:
    if isinstance(value, str):
        code = _DELIVERY.get(value.lower())
        if code is None:
            msg = f"delivery must be 'recoverable' or 'express', not {value!r}"
            raise InvalidArgument(msg)
        return code
    given: object = value  # what a caller passed, whatever its annotation says
    if not isinstance(given, int):
        msg = f"delivery must be 'recoverable', 'express' or 0..1, not {value!r}"
        raise InvalidArgument(msg)
    return int(value)


def _byte_buffer(body: object) -> bytes | bytearray | memoryview:
    """``body`` as a buffer whose ``len`` is its size in bytes."""
    try:
        view = memoryview(body)  # type: ignore[arg-type]
    except TypeError:
        msg = f"a message body is bytes, bytearray, memoryview or str, not {type(body).__name__}"
        raise InvalidArgument(msg) from None
    if view.itemsize != 1 or view.ndim != 1 or not view.c_contiguous:
        return view.tobytes()
    return view


def append_send(
    out: bytearray,
    request_id: int,
    tx_id: int,
    mode: int,
    destination: str,
    body: bytes | bytearray | memoryview | str,
    options: SendOptions,
) -> None:
    """Append one ``Send`` frame to ``out`` (nothing is appended if it raises).

    Raises:
        MessageTooLarge: the body is over 4 MB.
        InvalidArgument: a value cannot be sent (out of range, wrong type,
            unknown option), with the field named.
    """
    if isinstance(body, str):
        try:
            body = body.encode("utf-8")
        except UnicodeEncodeError as exc:
            msg = (
                f"the body is not valid Unicode text (position {exc.start}: a lone "
                "surrogate); send bytes, or text without one"
            )
            raise InvalidArgument(msg) from None
    elif type(body) is not bytes:
        body = _byte_buffer(body)
    if len(body) > cf.MAX_MESSAGE_BODY:
        msg = f"message body is {len(body)} bytes; the limit is {cf.MAX_MESSAGE_BODY} (4 MB)"
        raise MessageTooLarge(msg)
    unknown = options.keys() - SendOptions.__annotations__.keys()
    if unknown:
        msg = f"send() got unknown message properties: {', '.join(sorted(unknown))}"
        raise InvalidArgument(msg)
    correlation = options.get("correlation_id")
    priority = options.get("priority", 3)
    acknowledge = options.get("acknowledge", 0)
    journal = options.get("journal", 0)
    app_specific = options.get("app_specific", 0)
    try:
        delivery = _delivery(options.get("delivery", "recoverable"))
        # What the daemon would refuse, refused here: in a transaction it would
        # otherwise fail the whole transaction at its commit. One comparison
        # on this hot path; ``check_range`` says what is wrong.
        try:
            fits = (
                type(priority) is not bool
                and 0 <= priority <= 7
                and 0 <= delivery <= 1
                and 0 <= acknowledge <= 15
                and 0 <= journal <= _MAX_U8
                and 0 <= app_specific <= _MAX_U32
            )
        except TypeError:
            fits = False
        if not fits:
            _check_numbers(priority, delivery, acknowledge, journal, app_specific)
        parts = cf.encode_message_parts(
            body=body,
            label=options.get("label", ""),
            destination=destination,
            correlation_id=b"" if correlation is None else correlation,
            app_specific=app_specific,
            priority=priority,
            delivery=delivery,
            acknowledge=acknowledge,
            journal=journal,
            admin_queue=options.get("admin_queue", ""),
            response_queue=options.get("response_queue", ""),
            time_to_reach_queue=_seconds(options.get("time_to_reach_queue"), "time_to_reach_queue"),
            time_to_be_received=_seconds(options.get("time_to_be_received"), "time_to_be_received"),
        )
    except InvalidArgument as exc:
        msg = f"cannot send this message: {exc.message}"
        raise InvalidArgument(msg) from None
    except (LocalProtocolError, struct.error, TypeError, ValueError) as exc:
        # A number of another type (a float) gets past the comparison: name it.
        try:
            _check_numbers(priority, delivery, acknowledge, journal, app_specific)
        except InvalidArgument as wrong:
            msg = f"cannot send this message: {wrong.message}"
            raise InvalidArgument(msg) from None
        if isinstance(exc, LocalProtocolError):
            msg = f"cannot send this message: {exc}"
        else:
            msg = f"cannot send this message: {type(exc).__name__}: {exc}"
        raise InvalidArgument(msg) from None
    size = sum(len(part) for part in parts)
    if size + 9 > cf.MAX_FRAME_BODY:
        msg = f"cannot send this message: {size} bytes with its properties, over the frame limit"
        raise InvalidArgument(msg)
    cf.append_send_frame(out, request_id, tx_id, mode, parts)


#: The message properties sent as integers in fixed-width fields, with their
#: highest values (those of priority, delivery and acknowledge are the daemon's).
_MESSAGE_NUMBERS: Final = (
    ("priority", 7),
    ("delivery", 1),
    ("acknowledge", 15),
    ("journal", _MAX_U8),
    ("app_specific", _MAX_U32),
)


def _check_numbers(*values: object) -> None:
    """:func:`check_range` for each of :data:`_MESSAGE_NUMBERS`, given in that order."""
    for (name, high), value in zip(_MESSAGE_NUMBERS, values, strict=True):
        check_range(name, value, high)


def check_range(
    name: str, value: object, high: int, *, unit: str = "", optional: bool = False
) -> None:
    """Refuse an integer argument that is not in 0..``high`` (None passes if ``optional``).

    Every integer the client sends in a fixed-width field is checked by this,
    before it is encoded (the message names the argument, its range, and
    ``unit``).

    Raises:
        InvalidArgument: ``value`` is not an int in the range.
    """
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= high:
        return
    if value is None and optional:
        return
    expected = f"0..{high}{f' {unit}' if unit else ''}{' or None' if optional else ''}"
    msg = f"{name} must be {expected}, not {value!r}"
    raise InvalidArgument(msg)


#: The integer fields with a fixed-width encoding of the requests the public API
#: makes (besides the message of a send, checked by :func:`append_send`), by
#: request type: (field, the argument's name, highest value, unit, None allowed).
#: The fields a client fills in itself (request and transaction ids, actions,
#: rights, clamped timeouts) are not here, nor ``Receive``'s lookup id
#: (:func:`append_receive` checks it).
REQUEST_RANGES: Final[dict[type, tuple[tuple[str, str, int, str, bool], ...]]] = {
    cf.CreateQueue: (
        ("quota", "quota", _MAX_U64, "bytes", True),
        ("retry_count", "retry_count", _MAX_U32, "", True),
        ("retry_cycles", "retry_cycles", _MAX_U32, "", True),
    ),
    cf.SetQueueProperties: (
        ("quota", "quota", _MAX_U64, "bytes", True),
        ("retry_count", "retry_count", _MAX_U32, "", True),
        ("retry_cycles", "retry_cycles", _MAX_U32, "", True),
    ),
    cf.PeekRange: (
        ("after", "after", _MAX_U64, "", False),
        ("max_count", "max_count", _MAX_U32, "", False),
    ),
    cf.MeasureRange: (
        ("after", "after", _MAX_U64, "", False),
        ("max_count", "max_count", _MAX_U32, "", False),
    ),
    cf.RemoveThrough: (("lookup_id", "lookup_id", _MAX_U64, "", False),),
    cf.MoveMessages: (("lookup_id", "lookup_id", _MAX_U64, "", False),),
    cf.ListTransactions: (("max_count", "limit", _MAX_U32, "", False),),
}


def append_tx_request(out: bytearray, kind: cf.FrameKind, request_id: int, tx_id: int) -> None:
    """Append a Begin, Commit or Abort frame (each carries only the transaction id)."""
    out += cf.encode_tx_request(kind, request_id, tx_id)


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
    if lookup_id is not None and not (type(lookup_id) is int and 0 < lookup_id <= _MAX_U64):
        # 0 is the wire's "the next message": never a message's lookup id.
        msg = f"lookup_id must be a message's lookup id, 1 to 2**64 - 1, not {lookup_id!r}"
        raise InvalidArgument(msg)
    request = cf.Receive(
        tx_id=tx_id,
        queue=queue,
        timeout_ms=timeout_ms,
        peek=peek,
        lookup_id=0 if lookup_id is None else lookup_id,
    )
    append_request(out, request_id, request)


def append_request(out: bytearray, request_id: int, request: cf.ClientRequest) -> None:
    """Append the frame of any request.

    Raises:
        InvalidArgument: the request cannot be encoded (says which field):
            an integer out of its range (:data:`REQUEST_RANGES`) is refused
            before encoding, naming the argument and its range.
    """
    try:
        for field, name, high, unit, optional in REQUEST_RANGES.get(type(request), ()):
            check_range(name, getattr(request, field), high, unit=unit, optional=optional)
        out += cf.encode_frame(request_id, request)
    except (InvalidArgument, LocalProtocolError) as exc:
        msg = f"cannot send this request: {exc}"
        raise InvalidArgument(msg) from None


class RawMessageList:
    """A ``MessageList`` reply left undecoded: its frame body (see ``ReplyReader.raw``)."""

    __slots__ = ("body",)

    def __init__(self, body: bytes) -> None:
        self.body = body


#: How an HTTP response begins. No stream of frames begins so (a frame's
#: length would be over the limit): a connection whose first bytes are these
#: was made to an HTTP port.
_HTTP_START: Final = b"HTTP/"


class NotTheClientPort(RemoteProtocolError):
    """What answered is not a queue manager's client port (an HTTP server)."""


class ReplyReader:
    """Splits the daemon's byte stream into replies and hands each to ``deliver``.

    Attributes:
        raw: request ids whose ``MessageList`` reply is delivered undecoded,
            as a :class:`RawMessageList` (each id is dropped when its reply
            comes; any other reply to it is decoded as usual).
    """

    __slots__ = ("_decoder", "_deliver", "_first", "_in_decoder", "_rest", "raw")

    def __init__(self, deliver: Deliver) -> None:
        self._decoder = cf.ClientFrameDecoder(max_list_body=cf.MAX_LIST_FRAME_BODY)
        self._deliver = deliver
        self.raw: set[int] = set()
        self._rest = b""
        # Bytes of the frame being handed to the decoder that have not arrived yet.
        self._in_decoder = 0
        # The stream's first bytes, as many as _HTTP_START has, until there are as many.
        self._first = b""

    def feed(self, data: bytes | bytearray | memoryview) -> None:
        """Process received bytes; call ``deliver`` for every whole reply.

        Raises:
            NotTheClientPort: the stream begins as an HTTP response.
            RemoteProtocolError: the bytes are not valid frames (the
                connection must be closed).
        """
        if len(self._first) < len(_HTTP_START):
            self._first += bytes(data[: len(_HTTP_START) - len(self._first)])
            if self._first == _HTTP_START:
                msg = (
                    "the server answered in HTTP: this is an HTTP port (the queue "
                    "manager's HTTP listener?), not its client port"
                )
                raise NotTheClientPort(msg)
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
        deliver = self._deliver
        unpack_header = _HEADER.unpack_from
        while end - pos >= _HEADER_SIZE:
            length, kind, flags, request_id = unpack_header(buffer, pos)
            if kind == _OK and length == 8 and not flags:
                if end - pos < _OK_SIZE:
                    break
                (value,) = _U64.unpack_from(buffer, pos + _HEADER_SIZE)
                deliver(request_id, cf.Ok(value=value))
                pos += _OK_SIZE
                continue
            size = _HEADER_SIZE + length
            if kind == _MESSAGE_LIST and request_id in self.raw and length <= cf.MAX_FRAME_BODY:
                if end - pos < size:
                    break  # the rest of it comes later
                self.raw.discard(request_id)
                body = bytes(buffer[pos + _HEADER_SIZE : pos + size])
                deliver(request_id, RawMessageList(body))  # type: ignore[arg-type]
                pos += size
                continue
            # Any other frame: through the decoder, which checks it.
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
        self._deliver(frame.request_id, frame.value)
