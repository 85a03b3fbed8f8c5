"""Strict parsing with compiled construct layouts.

construct's compiled parsers are several times faster than interpreted ones,
but they read with plain ``io.read(n)`` and so accept a short read as if it
were whole ("not for untrusted data", construct's compilation docs). We keep
the speed and restore the checks in one place:

* the stream handed to the compiled parser is a :class:`StrictBytesIO`, whose
  ``read(n)`` raises when fewer than ``n`` bytes remain;
* after parsing, every byte must have been consumed;
* any exception raised while parsing (construct errors, ``struct.error``,
  ``UnicodeDecodeError``, ...) becomes one :class:`RemoteProtocolError`.

Building goes through the same translation, to :class:`LocalProtocolError`.
"""

from __future__ import annotations

import io
from typing import Any

import construct

from .protocol_errors import LocalProtocolError, RemoteProtocolError


class StrictBytesIO(io.BytesIO):
    """A BytesIO whose sized reads never come back short."""

    def read(self, size: int | None = -1, /) -> bytes:
        data = super().read(size)
        if size is not None and size >= 0 and len(data) != size:
            msg = f"needed {size} bytes, only {len(data)} left"
            raise construct.StreamError(msg)
        return data


def parse_exactly(layout: Any, data: bytes, what: str) -> Any:
    """Parse ``data`` with a (compiled) construct ``layout`` that must consume all of it.

    Raises:
        RemoteProtocolError: the bytes do not match the layout; ``field`` is ``what``.
    """
    stream = StrictBytesIO(data)
    try:
        value = layout.parse_stream(stream)
    except Exception as exc:
        msg = f"malformed: {_describe(exc)}"
        raise RemoteProtocolError(msg, field=what) from exc
    consumed = stream.tell()
    if consumed != len(data):
        msg = f"{len(data) - consumed} unexpected trailing bytes"
        raise RemoteProtocolError(msg, field=what)
    return value


def build_with(layout: Any, value: Any, what: str) -> bytes:
    """Build bytes from ``value`` with a construct ``layout``.

    Raises:
        LocalProtocolError: the value cannot be encoded (out of range, too long, wrong type).
    """
    try:
        data: bytes = layout.build(value)
    except Exception as exc:
        msg = f"cannot encode: {_describe(exc)}"
        raise LocalProtocolError(msg, field=what) from exc
    return data


def _describe(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    detail = text[-1] if text else ""
    return f"{type(exc).__name__}: {detail}" if detail else type(exc).__name__
