"""The events a :class:`~qmgr.protocol.client_connection.ClientConnection` reports.

Plain immutable values: what :meth:`ClientConnection.next_event
<qmgr.protocol.client_connection.ClientConnection.next_event>` returns, each a
decision for its adapter (the machine's theory of operation says what each
asks of it). The machine itself is in :mod:`qmgr.protocol.client_connection`.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Final, TypeAlias

from wire import client as cf

__all__ = [
    "CLOSED",
    "NEED_DATA",
    "Authenticated",
    "Closed",
    "Event",
    "Greeted",
    "NeedData",
    "Refused",
    "ReleaseFrame",
    "Request",
    "ReserveFrame",
    "TokenOffered",
    "Violation",
    "ViolationKind",
]

#: A request to run: the decoded frame (``request_id``, ``value``) as the decoder made it.
Request: TypeAlias = cf.Frame


class NeedData:
    """Nothing more can be decided until more bytes arrive."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "NEED_DATA"


NEED_DATA: Final = NeedData()


@dataclass(frozen=True, slots=True)
class Greeted:
    """The Hello was answered with ``version``; ``admitted`` if that was all it needed."""

    client_name: str
    version: int
    admitted: bool


@dataclass(frozen=True, slots=True)
class TokenOffered:
    """An ``Authenticate``: say whose ``token`` it is with :meth:`ClientConnection.authenticate`."""

    request_id: int
    token: str


@dataclass(frozen=True, slots=True)
class Authenticated:
    """The connection is ``principal`` now (``Ok`` is in the outbox); ``admitted`` if that
    admitted it."""

    principal: str
    admitted: bool


@dataclass(frozen=True, slots=True)
class ReserveFrame:
    """A frame of ``length`` body bytes has begun: reserve them before it is buffered."""

    length: int


@dataclass(frozen=True, slots=True)
class ReleaseFrame:
    """The reserved frame is whole: give its ``length`` bytes back."""

    length: int


@dataclass(frozen=True, slots=True)
class Refused:
    """A request made while the server stops: answer it with an error and go on."""

    request_id: int
    value: cf.FrameValue
    message: str


class ViolationKind(enum.Enum):
    """How a client broke the protocol."""

    #: Bytes that are not a frame (request id 0).
    MALFORMED = "malformed"
    #: A first frame other than Hello.
    HELLO_FIRST = "hello first"
    #: No version both sides speak.
    UNSUPPORTED_VERSION = "unsupported version"
    #: A frame that is not a request the server runs, or needs a later version.
    NOT_ALLOWED = "not allowed"
    #: A request before authenticating, where clients must.
    AUTHENTICATE_FIRST = "authenticate first"
    #: A token that names nobody, or someone other than the connection's principal.
    TOKEN_REFUSED = "token refused"


@dataclass(frozen=True, slots=True)
class Violation:
    """The client broke the protocol: the error reply is in the outbox; close after writing it."""

    kind: ViolationKind
    request_id: int
    message: str
    #: The class name of the frame at fault ("" for malformed bytes).
    request: str = ""

    @property
    def reason(self) -> str:
        """Why the connection closes, for the log."""
        if self.kind is ViolationKind.MALFORMED:
            return f"malformed frame: {self.message}"
        return "protocol violation"


@dataclass(frozen=True, slots=True)
class Closed:
    """The connection is over (``reason``): the client closed it, or it was ended."""

    reason: str


CLOSED: Final = Closed("closed by client")

Event: TypeAlias = (
    Request
    | NeedData
    | Greeted
    | TokenOffered
    | ReserveFrame
    | ReleaseFrame
    | Refused
    | Violation
    | Closed
)
