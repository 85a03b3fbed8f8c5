"""The text fields of the wire formats, and what is said of a text that cannot go in one.

Every text of the client protocol and of a message is UTF-8 after a u16 length,
so it carries at most :data:`MAX_TEXT_BYTES` bytes, and a ``str`` holding a lone
surrogate (what Python makes of non-UTF-8 bytes in a command-line argument)
has no UTF-8 at all. :func:`text_error` says which of the two is wrong, naming
the field, for the encoders to raise instead of their codec's own words.

:func:`quoted` is how every layer writes a name (a queue, a format name, a
destination, a transaction id) in a message people read: as it is typed, in
single quotes, not doubled by ``repr``.
"""

from __future__ import annotations

from typing import Final

from .protocol_errors import TextFieldError

__all__ = ["MAX_TEXT_BYTES", "quoted", "text_error"]

#: The most bytes of UTF-8 a text field carries (its length is a u16).
MAX_TEXT_BYTES: Final = 0xFFFF


def quoted(name: str) -> str:
    """``name`` (a queue, format name, destination or transaction id) in single quotes,
    as it is typed: backslashes are not doubled, so that it can be copied back into a
    command. A name with a character that does not print keeps Python's escapes."""
    return f"'{name}'" if name.isprintable() else repr(name)


def text_error(
    name: str, text: object, *, field: str | None = None, limit: int = MAX_TEXT_BYTES
) -> TextFieldError | None:
    """Why ``text`` cannot go in the text field ``name`` (``field``: as the format names
    it; default ``name``) of at most ``limit`` bytes, or None if it can (or is no
    ``str``: the encoder says what else is wrong)."""
    if not isinstance(text, str):
        return None
    try:
        size = len(text.encode("utf-8"))
    except UnicodeEncodeError as exc:
        msg = (
            f"{name} is not valid Unicode text (position {exc.start}: a lone surrogate, "
            "as non-UTF-8 bytes in a command-line argument give)"
        )
        return TextFieldError(msg, field=field or name)
    if size <= limit:
        return None
    chars = len(text)
    counted = f"{chars:,} characters" if chars == size else f"{chars:,} characters, {size:,} bytes"
    msg = f"{name} is too long to send ({counted}): it can carry at most {limit:,} bytes of UTF-8"
    return TextFieldError(msg, field=field or name)
