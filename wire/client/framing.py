"""Frames on a stream: encoding a whole frame, and the sans-IO frame decoder.

A connection is a stream of frames in both directions. Every frame is a
12-byte header followed by a body:

=======  ====  ==============================================================
offset   size  field
=======  ====  ==============================================================
0        4     body length in bytes (u32, little-endian), at most
               ``MAX_FRAME_BODY``; checked before any of the body is buffered
4        2     kind (:class:`FrameKind`)
6        2     flags, must be 0 (reserved for later versions)
8        4     request id: chosen by the client, echoed in the reply, so that
               a client can pipeline many requests on one connection
=======  ====  ==============================================================

Theory of operation
-------------------
:func:`encode_frame` packs a value's body with the hand-written encoder of
:mod:`wire.client.fast_codec` when its kind has one, else with its construct
layout (:mod:`wire.client.layout_codec`), and puts the header in front;
:func:`decode_body` picks the decoder the same way. Whichever encoder fails,
a text that cannot go in its field (not valid Unicode, or over 65,535 bytes)
is named by where it is in the value (``CreateList.targets[1]``), in the
words of :func:`wire.text_fields.text_error`, not the encoder's.

:class:`ClientFrameDecoder` is a state machine over a
:class:`~wire.receive_buffer.ReceiveBuffer`, with three states:

* *between frames* (no header read): wait for 12 bytes, then check the
  header (flags, the declared size against the limit, the kind) before any
  of the body is buffered, and remember it;
* *in a frame* (a header read): :attr:`~ClientFrameDecoder.pending_body`
  says how many body bytes are due, so a daemon can account for them before
  reading them; wait until they are buffered, take exactly them, decode the
  body and go back to *between frames*;
* *broken*: the first malformed header or body is kept and raised again by
  every later call, since a stream cannot be resynchronised after it.
"""

from __future__ import annotations

import dataclasses
import struct
from collections.abc import Iterator
from typing import Final

from ..protocol_errors import LocalProtocolError, RemoteProtocolError, TextFieldError
from ..receive_buffer import ReceiveBuffer
from ..text_fields import text_error
from .constants import (
    HEADER_SIZE,
    LARGE_LISTS_VERSION,
    LIST_REPLY_KINDS,
    MAX_FRAME_BODY,
    MAX_LIST_FRAME_BODY,
    FrameKind,
)
from .fast_codec import FAST_DECODE, FAST_ENCODE, HEADER
from .frames import KIND_OF, Frame, FrameValue
from .layout_codec import decode_body_with_layout, encode_body_with_layout

_VALID_KINDS: Final = frozenset(int(k) for k in FrameKind)


class FrameTooLarge(LocalProtocolError):
    """A frame's body is over the limit it was encoded for (``size`` and ``limit`` say
    by how much): a reply the daemon must answer some other way."""

    def __init__(self, message: str, *, field: str, size: int, limit: int) -> None:
        super().__init__(message, field=field)
        self.size = size
        self.limit = limit


def encode_frame(request_id: int, value: FrameValue, *, max_body: int = MAX_FRAME_BODY) -> bytes:
    """Encode one frame whose body may be up to ``max_body`` bytes (``MAX_FRAME_BODY``;
    ``MAX_LIST_FRAME_BODY`` for a whole-list reply on a connection of
    ``LARGE_LISTS_VERSION`` or later).

    Raises:
        FrameTooLarge: the body is over ``max_body``.
        TextFieldError: a text is not valid Unicode or too long for its field (named).
        LocalProtocolError: a field is out of range.
    """
    cls = type(value)
    kind = KIND_OF.get(cls)
    if kind is None:
        msg = f"{cls.__name__} is not a client-protocol frame"
        raise LocalProtocolError(msg)
    if not 0 <= request_id <= 0xFFFFFFFF:
        msg = f"request id {request_id} does not fit in 32 bits"
        raise LocalProtocolError(msg, field="request_id")
    fast = FAST_ENCODE.get(cls)
    try:
        body = encode_body_with_layout(value) if fast is None else fast(value)
    except (LocalProtocolError, struct.error, UnicodeEncodeError, TypeError, AttributeError) as exc:
        # A text that cannot go in its field is named in words, whichever encoder
        # failed; other faults (out-of-range numbers, wrong types) as the encoder says.
        text = _text_fault(value, cls.__name__)
        if text is not None:
            raise text from exc
        if isinstance(exc, LocalProtocolError):
            raise
        msg = f"cannot encode: {type(exc).__name__}: {exc}"
        raise LocalProtocolError(msg, field=cls.__name__) from exc
    if len(body) > max_body:
        msg = f"frame body of {len(body)} bytes is over the {max_body}-byte limit"
        raise FrameTooLarge(msg, field=cls.__name__, size=len(body), limit=max_body)
    return HEADER.pack(len(body), kind, 0, request_id) + body


def _text_fault(value: object, frame: str) -> TextFieldError | None:
    """The first text of ``value``, a ``frame``, that cannot go in a text field, if any
    (its ``field`` is the frame's, as for any other fault; its message says where):
    a field declared ``str`` that holds no ``str`` (a ``None``) is one too."""
    for where, text in _texts(value, frame):
        if not isinstance(text, str):
            return TextFieldError(f"{where} must be text, not {text!r}", field=frame)
        error = text_error(where, text, field=frame)
        if error is not None:
            return error
    return None


def _texts(value: object, path: str, declared: bool = False) -> Iterator[tuple[str, object]]:
    """Every ``str`` in a frame value, and every value of a field declared ``str``
    (``declared``), with where it is (``CreateList.targets[2]``)."""
    if isinstance(value, str) or declared:
        yield path, value
    elif isinstance(value, tuple | list):
        for index, item in enumerate(value):
            yield from _texts(item, f"{path}[{index}]")
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        for field in dataclasses.fields(value):
            yield from _texts(
                getattr(value, field.name), f"{path}.{field.name}", field.type == "str"
            )


def max_reply_body(reply: FrameValue, version: int) -> int:
    """The largest body ``reply`` may have on a connection of protocol ``version``:
    ``MAX_LIST_FRAME_BODY`` for a whole-list reply from ``LARGE_LISTS_VERSION`` on,
    else ``MAX_FRAME_BODY``."""
    if version >= LARGE_LISTS_VERSION and KIND_OF.get(type(reply)) in LIST_REPLY_KINDS:
        return MAX_LIST_FRAME_BODY
    return MAX_FRAME_BODY


def decode_body(kind: int, body: bytes) -> FrameValue:
    """Decode the body of a frame whose header said ``kind``.

    Raises:
        RemoteProtocolError: unknown kind, or the body does not match its layout.
    """
    fast = FAST_DECODE.get(kind)  # type: ignore[call-overload]
    if fast is not None:
        return fast(body)  # type: ignore[no-any-return]
    try:
        frame_kind = FrameKind(kind)
    except ValueError:
        msg = f"unknown frame kind 0x{kind:02x}"
        raise RemoteProtocolError(msg, field="kind") from None
    return decode_body_with_layout(frame_kind, body)


class ClientFrameDecoder:
    """Sans-IO decoder for client-protocol frames.

    Feed bytes with :meth:`receive_data`; call :meth:`next_frame` until it
    returns ``None`` (more data needed). Any input either decodes or raises
    :class:`RemoteProtocolError`; after an error the decoder stays broken and
    the connection should be closed.

    Args:
        max_body: the largest body accepted; a header declaring more is an error.
        max_list_body: the largest body of a whole-list reply (``LIST_REPLY_KINDS``),
            for a client's decoder (a daemon's keeps ``max_body`` for every kind).
    """

    def __init__(self, *, max_body: int = MAX_FRAME_BODY, max_list_body: int | None = None) -> None:
        self._buffer = ReceiveBuffer()
        self._max_body = max_body
        self._max_list_body = max_body if max_list_body is None else max(max_list_body, max_body)
        self._header: tuple[int, int, int] | None = None
        self._error: RemoteProtocolError | None = None

    @property
    def buffered(self) -> int:
        """Bytes received but not yet returned as frames."""
        return len(self._buffer)

    @property
    def pending_body(self) -> int:
        """The declared body size of the frame whose header has been read, else 0.

        A daemon accounts these bytes against its memory budget before
        reading them.
        """
        return 0 if self._header is None else self._header[0]

    @property
    def in_frame(self) -> bool:
        """True while part of a frame has been received but not all of it."""
        return self._header is not None or len(self._buffer) > 0

    def receive_data(self, data: bytes | bytearray | memoryview) -> None:
        """Add received bytes."""
        self._buffer.append(data)

    def next_header(self) -> tuple[int, int, int] | None:
        """Read the next frame's header if it is complete: ``(body length, kind, request id)``.

        :meth:`next_frame` calls it; a caller may call it first to look at
        the size of the frame before the body arrives.

        Raises:
            RemoteProtocolError: as :meth:`next_frame`.
        """
        if self._error is not None:
            raise self._error
        if self._header is None:
            raw = self._buffer.take(HEADER_SIZE)
            if raw is None:
                return None
            length, kind, flags, request_id = HEADER.unpack(raw)
            error = self._check_header(length, kind, flags)
            if error is not None:
                self._error = error
                raise error
            self._header = (length, kind, request_id)
        return self._header

    def _check_header(self, length: int, kind: int, flags: int) -> RemoteProtocolError | None:
        if flags != 0:
            msg = f"reserved flags 0x{flags:04x} are set"
            return RemoteProtocolError(msg, field="FrameHeader.flags")
        limit = self._max_list_body if kind in LIST_REPLY_KINDS else self._max_body
        if length > limit:
            msg = f"declared body of {length} bytes is over the {limit}-byte limit"
            return RemoteProtocolError(msg, field="FrameHeader.length")
        if kind not in _VALID_KINDS:
            msg = f"unknown frame kind 0x{kind:02x}"
            return RemoteProtocolError(msg, field="FrameHeader.kind")
        return None

    def next_frame(self) -> Frame | None:
        """Return the next whole frame, or None if more bytes are needed.

        Raises:
            RemoteProtocolError: the bytes are not a valid frame (bad header
                flags, a declared size over the limit, an unknown kind, or a
                body that does not match its layout).
        """
        header = self._header
        if header is None:
            header = self.next_header()
            if header is None:
                return None
        length, kind, request_id = header
        body = self._buffer.take(length)
        if body is None:
            return None
        self._header = None
        try:
            value = decode_body(kind, body)
        except RemoteProtocolError as exc:
            self._error = exc
            raise
        return Frame(request_id=request_id, value=value)
