"""The error tree of the wire layer.

Every failure to understand bytes from a peer is a :class:`RemoteProtocolError`;
every attempt to build bytes from a value that cannot be encoded is a
:class:`LocalProtocolError`. Both derive from :class:`ProtocolError`, which is
never raised itself. ``construct`` errors never escape this package: they are
translated at the one place where parsing or building happens.
"""

from __future__ import annotations


class ProtocolError(Exception):
    """Base of all wire errors. Not raised directly.

    Attributes:
        field: the name of the field that was wrong, when one can be named
            (for example ``"BaseHeader.Signature"``), else ``None``.
    """

    def __init__(self, message: str, *, field: str | None = None) -> None:
        if type(self) is ProtocolError:
            msg = "ProtocolError is abstract: raise LocalProtocolError or RemoteProtocolError"
            raise TypeError(msg)
        super().__init__(message)
        self.message = message
        self.field = field

    def __str__(self) -> str:
        if self.field:
            return f"{self.field}: {self.message}"
        return self.message


class RemoteProtocolError(ProtocolError):
    """The bytes received are malformed: a peer broke the protocol.

    The right reaction is to drop the connection (MQQB §3.1.5.1.2-§3.1.5.1.3);
    nothing that was already stored is affected.
    """


class LocalProtocolError(ProtocolError):
    """A value cannot be encoded: the caller asked for something the format cannot carry."""


class TextFieldError(LocalProtocolError):
    """A text cannot go in its field: not valid Unicode, or longer than the field carries.

    Its message names the field (``CreateQueue.name``, ``label``) and is the whole
    of ``str()``; ``field`` is what other errors of the value name (``"CreateQueue"``,
    ``"MessageProperties.label"``).
    """

    def __str__(self) -> str:
        return self.message
