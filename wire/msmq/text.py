"""NUL-terminated UTF-16LE strings, the WCHAR buffers of the MSMQ packets.

Windows strings are sequences of 16-bit units that need not be valid UTF-16,
so they are decoded with ``surrogatepass``: any even-length byte string
decodes, and the resulting ``str`` encodes back to the same bytes. A string
carried here never contains NUL; the terminator is added and checked here.
"""

from __future__ import annotations

from ..protocol_errors import LocalProtocolError, RemoteProtocolError

_NUL = b"\x00\x00"


def decode_utf16z(raw: bytes, field: str) -> str:
    """Decode a WCHAR buffer that includes its terminating NUL.

    Raises:
        RemoteProtocolError: odd length, no terminator, or a NUL inside the text.
    """
    if len(raw) & 1:
        msg = f"UTF-16 buffer has odd length {len(raw)}"
        raise RemoteProtocolError(msg, field=field)
    if raw[-2:] != _NUL:
        msg = "string is not NUL-terminated"
        raise RemoteProtocolError(msg, field=field)
    text = raw[:-2].decode("utf-16-le", "surrogatepass")
    if "\x00" in text:
        msg = f"NUL inside the string at character {text.index(chr(0))}"
        raise RemoteProtocolError(msg, field=field)
    return text


def encode_utf16z(text: object, field: str) -> bytes:
    """Encode ``text`` as UTF-16LE with a terminating NUL.

    Raises:
        LocalProtocolError: ``text`` is not a str or contains NUL.
    """
    if not isinstance(text, str):
        msg = f"expected a str, got {type(text).__name__}"
        raise LocalProtocolError(msg, field=field)
    if "\x00" in text:
        msg = "a string sent on the wire cannot contain NUL"
        raise LocalProtocolError(msg, field=field)
    return text.encode("utf-16-le", "surrogatepass") + _NUL
