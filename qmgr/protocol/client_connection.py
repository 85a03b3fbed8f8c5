"""The server side of one client connection, as a sans-IO state machine.

Theory of operation
-------------------
A :class:`ClientConnection` decides everything about a client connection
that needs no store, no clock and no socket: how bytes become frames, the
Hello, which requests the connection may make now, who it is, when it must
be closed, and how replies are framed. Its adapter (the daemon's
``ClientSession``) moves the bytes, reads the clock, runs the requests and
keeps the state of their work (transactions, waiting receives); it is driven
like h11 or wsproto:

* :meth:`~ClientConnection.receive_data` with each read and the caller's
  ``now`` (``b""`` at the end of the stream);
* :meth:`~ClientConnection.next_event` until it says :data:`NEED_DATA`; each
  event (:mod:`.client_events`) is a decision for the adapter:

  - a :data:`Request` (the decoded :class:`wire.client.Frame`): run it;
  - :class:`Greeted`: the Hello was answered (``HelloOk`` is in the outbox);
  - :class:`TokenOffered`: an ``Authenticate`` to check; the adapter answers
    with :meth:`~ClientConnection.authenticate` (whose principal the token
    names, or None);
  - :class:`ReserveFrame`: a frame larger than one read has begun; the
    adapter reserves its size in the daemon-wide budget and calls
    :meth:`~ClientConnection.frame_reserved` (until then the same event comes
    back), or refuses it and ends the connection with
    :meth:`~ClientConnection.farewell`; :class:`ReleaseFrame` gives the bytes
    back once that frame is whole;
  - :class:`Refused`: a request made while the server stops (answered
    ``SHUTTING_DOWN`` by the adapter, which dooms its transaction);
  - :class:`Violation`: the client broke the protocol; the error reply is in
    the outbox and the connection is over: write it, then close;
  - :class:`Closed`: the client closed its end (or the connection was ended).

* replies go into the outbox (:meth:`~ClientConnection.send`,
  :meth:`~ClientConnection.send_bytes`); :meth:`~ClientConnection.data_to_send`
  takes it all as one write. The adapter writes once per read, and sooner when
  ``outbox_bytes`` passes ``flush_bytes`` (a client that pipelines many peeks
  of large messages must not make the daemon hold all their replies).

States. A connection starts *new*: the first frame must be ``Hello``, which
agrees on a version (the highest both speak, at least
``wire.client.MIN_PROTOCOL_VERSION``); anything else, or no common version,
is a violation. It is then *greeted*. It is *admitted* once greeted and, when
clients must authenticate (``auth_required``), authenticated: by the
principal it arrived with (a client certificate, a local user) or by a
token (``Authenticate``, version 6). Until then, with ``auth_required``,
every other request is a violation ("authenticate first"). A request the
server does not run, or that needs a later version than the one agreed
(:func:`version_needed`), is a violation too, and so is a request that
carries a field a later version added (:func:`newer_field`: a quota in
``SetQueueProperties`` below version 10). After a violation or a
farewell the connection is *closed*: it reports :class:`Closed` from then on.

Deadlines. :meth:`~ClientConnection.deadline` says when the next read must
have come, from values only (the caller says whether the connection is busy:
open transactions or waiting receives):

* until admitted: ``hello_timeout`` from the connection's arrival (before
  its TLS handshake), Hello or not;
* while a frame has begun and is not whole: ``frame_timeout`` from the end of
  the read in which it began, or in which the last whole frame arrived (a
  slow sender cannot hold a slot with a trickle of bytes);
* while not busy: ``idle_timeout`` from the last read;
* else none. :meth:`~ClientConnection.deadline_reason` says which one passed.

Bounds. The decoder refuses a declared body over ``MAX_FRAME_BODY`` before
buffering any of it; a body larger than ``large_frame`` (one read) is
buffered only once the adapter has reserved it.

Until the connection is admitted, each frame is judged by its 12-byte
header, before any of its body is read or reserved: a first frame of a kind
other than Hello, and (greeted, clients must authenticate) a frame other than
Authenticate, is refused as its body would have been (but for a request while
the server stops, whose small body is read to refuse it with its value); and
a body over ``MAX_UNADMITTED_BODY`` (room for the largest Hello or
Authenticate) is malformed. A connection that has not shown who it is
therefore makes the daemon decode no more than a Hello and one small frame,
and reserves nothing from the daemon-wide budget for frames (at most
``MAX_UNADMITTED_BODY`` with a ``large_frame`` below it).

The machine never raises for what the client sends: malformed bytes are a
:class:`Violation` with ``BAD_REQUEST`` and request id 0.
"""

from __future__ import annotations

import math
import types
import typing
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Final

from wire import RemoteProtocolError
from wire import client as cf
from wire.text_fields import MAX_TEXT_BYTES

from .client_events import (
    CLOSED,
    NEED_DATA,
    Authenticated,
    Closed,
    Event,
    Greeted,
    Refused,
    ReleaseFrame,
    ReserveFrame,
    TokenOffered,
    Violation,
    ViolationKind,
)

__all__ = [
    "AUTHENTICATE_FIRST",
    "LARGEST_HELLO_BODY",
    "LARGE_FRAME",
    "MAX_UNADMITTED_BODY",
    "OUTBOX_FLUSH_BYTES",
    "SERVED_REQUESTS",
    "SHUTTING_DOWN",
    "ClientConnection",
    "ConnectionSettings",
    "newer_field",
    "version_needed",
    "versions_needed",
]

#: A body larger than this (one read of the adapter) is reserved before it is buffered.
LARGE_FRAME: Final = 256 * 1024
#: The largest body of a Hello (its magic, two u16 versions, and a client name
#: of ``MAX_TEXT_BYTES`` behind its u16 length): 65,545 bytes. An Authenticate
#: (one token of at most ``MAX_TEXT_BYTES`` behind its u16 length) is 65,537.
LARGEST_HELLO_BODY: Final = len(cf.HELLO_MAGIC) + 2 + 2 + 2 + MAX_TEXT_BYTES
#: The largest body of a frame a connection may send before it is admitted:
#: 80 KiB (81,920 bytes), the largest Hello with 16,375 bytes to spare, and far
#: below ``LARGE_FRAME``: before it is admitted, a connection reserves nothing
#: from the daemon-wide budget for frames being received.
MAX_UNADMITTED_BODY: Final = 80 * 1024
#: Replies held for one connection before they should be written, whatever is still to handle.
OUTBOX_FLUSH_BYTES: Final = 1 << 20
#: What a client that has not authenticated is told when it must.
AUTHENTICATE_FIRST: Final = (
    "authenticate first: this queue manager requires a client certificate or a token"
)
#: What a request is answered while the server stops.
SHUTTING_DOWN: Final = "the queue manager is shutting down"


def version_needed(request: type[object]) -> int:
    """The protocol version a connection needs for a request of this class."""
    if request in cf.CANCEL_REQUESTS:
        return cf.CANCEL_VERSION
    if request in cf.ROUTING_REQUESTS:
        return cf.ROUTING_VERSION
    if request in cf.SECURITY_REQUESTS:
        return cf.SECURITY_VERSION
    if request in cf.POISON_REQUESTS:
        return cf.POISON_VERSION
    if request in cf.OUTCOMES_REQUESTS:
        return cf.OUTCOMES_VERSION
    if request in cf.TWO_PHASE_REQUESTS:
        return cf.TWO_PHASE_VERSION
    return cf.MIN_PROTOCOL_VERSION


def newer_field(request: object) -> tuple[str, int] | None:
    """A field of ``request`` that a version later than its class's added, and
    that version (None: it has none). Such a field is refused on an earlier
    connection, as a request of that version would be: a ``SetQueueProperties``
    that changes the quota (its trailer) needs ``QUOTA_VERSION``."""
    if isinstance(request, cf.SetQueueProperties) and request.changes_quota:
        return "quota", cf.QUOTA_VERSION
    return None


def versions_needed(requests: Iterable[type[object]]) -> dict[type[object], int]:
    """The version each of ``requests`` needs: a server's table of what it runs."""
    return {request: version_needed(request) for request in requests}


#: Every request of the protocol a server runs (all but Hello and Authenticate,
#: which the machine answers itself), with the version it needs.
SERVED_REQUESTS: Final[Mapping[type[object], int]] = types.MappingProxyType(
    versions_needed(
        cls for cls in typing.get_args(cf.ClientRequest) if cls not in (cf.Hello, cf.Authenticate)
    )
)


@dataclass(frozen=True, slots=True, kw_only=True)
class ConnectionSettings:
    """What a server says of itself, and the bounds of its connections."""

    qm_name: str
    qm_guid: uuid.UUID
    server_version: str
    #: The requests the server runs, with the version each needs (see :func:`versions_needed`).
    requests: Mapping[type[object], int] = field(default_factory=lambda: SERVED_REQUESTS)
    #: Clients must authenticate (a principal from the transport, or a token).
    auth_required: bool = False
    hello_timeout: float = 10.0
    frame_timeout: float = 30.0
    idle_timeout: float = 600.0
    large_frame: int = LARGE_FRAME
    flush_bytes: int = OUTBOX_FLUSH_BYTES


_VIOLATION_CODES: Final = {
    ViolationKind.UNSUPPORTED_VERSION: cf.ErrorCode.UNSUPPORTED_VERSION,
    ViolationKind.AUTHENTICATE_FIRST: cf.ErrorCode.ACCESS_DENIED,
    ViolationKind.TOKEN_REFUSED: cf.ErrorCode.ACCESS_DENIED,
}


# ---------------------------------------------------------------------- the machine


class ClientConnection:
    """The server side of one client connection; see the module docstring.

    Args:
        settings: the server's identity, the requests it runs, and the bounds.
        opened_at: when the connection arrived (before its TLS handshake, if any).
        principal: who the transport says the client is (a certificate's name,
            a local user), or None.
    """

    def __init__(
        self, settings: ConnectionSettings, *, opened_at: float, principal: str | None = None
    ) -> None:
        self.settings = settings
        self._versions = settings.requests
        self._decoder = cf.ClientFrameDecoder()
        #: Whom the connection is authenticated as, or None.
        self.principal = principal
        self.greeted = False
        #: Greeted and, if clients must authenticate, authenticated.
        self.admitted = False
        #: The version agreed in the Hello (0 before).
        self.version = 0
        #: Set by :meth:`stop`: requests are refused from then on.
        self.stopping = False
        self.opened_at = opened_at
        self.last_read = opened_at
        #: When the frame in progress began (see the module docstring), or None.
        self.frame_started: float | None = None
        #: Body bytes reserved for the frame being buffered (given back by ReleaseFrame).
        self.reserved = 0
        #: Encoded frames to write, in order, and their size.
        self.outbox: list[bytes] = []
        self.outbox_bytes = 0
        self._now = opened_at
        self._completed = False
        self._whole: cf.Frame | None = None
        self._eof = False
        self._closed: Closed | None = None

    # ------------------------------------------------------------------ input

    def receive_data(self, data: bytes | bytearray | memoryview, now: float) -> None:
        """Bytes read at ``now``; ``b""`` means the client closed its end."""
        if not data:
            self._eof = True
            return
        self.last_read = now
        self._now = now
        self._completed = False
        self._decoder.receive_data(data)

    def stop(self) -> None:
        """The server is stopping: every request from now on is :class:`Refused`."""
        self.stopping = True

    def next_event(self) -> Event:
        """The next decision (see the module docstring); never raises for what the
        client sent."""
        if self._closed is not None:
            return self._closed
        whole = self._whole
        if whole is not None:
            self._whole = None
            return self._frame_event(whole)
        decoder = self._decoder
        try:
            header = decoder.next_header()
            if header is None:
                return self._need_data()
            length = header[0]
            if not self.admitted:
                refused = self._unadmitted(*header)
                if refused is not None:
                    return refused
            if length > self.settings.large_frame and not self.reserved:
                return ReserveFrame(length)
            frame = decoder.next_frame()
        except RemoteProtocolError as exc:
            return self._violation(ViolationKind.MALFORMED, 0, str(exc))
        if frame is None:
            return self._need_data()
        self._completed = True
        if self.reserved:
            released, self.reserved = self.reserved, 0
            self._whole = frame
            return ReleaseFrame(released)
        return self._frame_event(frame)

    def frame_reserved(self) -> None:
        """The frame of the last :class:`ReserveFrame` is reserved: buffer it."""
        header = self._decoder.next_header()
        assert header is not None, "no frame has begun"
        self.reserved = header[0]

    def authenticate(self, request_id: int, principal: str | None) -> Authenticated | Violation:
        """The token of the :class:`TokenOffered` ``request_id`` names ``principal``
        (None: nobody). A token refused ends the connection."""
        if principal is None:
            return self._violation(
                ViolationKind.TOKEN_REFUSED, request_id, "the token is not accepted", "Authenticate"
            )
        if self.principal is not None and self.principal != principal:
            message = f"this connection is authenticated as {self.principal!r}"
            return self._violation(ViolationKind.TOKEN_REFUSED, request_id, message, "Authenticate")
        self.principal = principal
        self.send(request_id, cf.Ok())
        return Authenticated(principal, self._admit())

    def _need_data(self) -> Event:
        decoder = self._decoder
        if not decoder.in_frame:
            self.frame_started = None
        elif self._completed or self.frame_started is None:
            self.frame_started = self._now
        self._completed = False
        if self._eof:
            self._closed = CLOSED
            return CLOSED
        return NEED_DATA

    def _unadmitted(self, length: int, kind: int, request_id: int) -> Violation | None:
        """Judge the header of a frame that arrives before the connection is
        admitted (see the module docstring): the violation its body would have
        been, decided without it, or None to read the body."""
        cls = cf.CLASS_OF[cf.FrameKind(kind)]
        name = cls.__name__
        if not self.greeted:
            if cls is not cf.Hello:
                return self._not_hello(request_id, name)
        elif cls is not cf.Authenticate:
            # Greeted, not authenticated: the kind says it all, but for a request
            # while the server stops, which is refused with its value (if small).
            if not self._runs(cls):
                return self._not_allowed(request_id, cls)
            if not self.stopping or length > MAX_UNADMITTED_BODY:
                return self._authenticate_first(request_id, name)
        if length > MAX_UNADMITTED_BODY:
            message = (
                f"a {name} frame of {length} bytes is over the {MAX_UNADMITTED_BODY}-byte "
                "limit of a frame before the connection is admitted"
            )
            return self._violation(ViolationKind.MALFORMED, 0, message)
        return None

    def _runs(self, cls: type[object]) -> bool:
        """True if the server runs requests of ``cls`` at the version agreed."""
        needed = self._versions.get(cls)
        return needed is not None and needed <= self.version

    def _frame_event(self, frame: cf.Frame) -> Event:
        value = frame.value
        cls = type(value)
        if not self.greeted:
            return self._hello(frame.request_id, value)
        if self._runs(cls):
            if self.stopping:
                return Refused(frame.request_id, value, SHUTTING_DOWN)
            if not self.admitted:  # greeted: only authentication is missing
                return self._authenticate_first(frame.request_id, cls.__name__)
            newer = newer_field(value)
            if newer is not None and newer[1] > self.version:
                return self._newer_field(frame.request_id, cls, *newer)
            return frame
        if isinstance(value, cf.Authenticate) and self.version >= cf.SECURITY_VERSION:
            return TokenOffered(frame.request_id, value.token)
        return self._not_allowed(frame.request_id, cls)

    def _authenticate_first(self, request_id: int, name: str) -> Violation:
        return self._violation(
            ViolationKind.AUTHENTICATE_FIRST, request_id, AUTHENTICATE_FIRST, name
        )

    def _not_allowed(self, request_id: int, cls: type[object]) -> Violation:
        message = f"{cls.__name__} is not a request a client may send now"
        least = version_needed(cls)
        if self.version < least:
            message += (
                f" (it needs protocol version {least}; this connection agreed on {self.version})"
            )
        return self._violation(ViolationKind.NOT_ALLOWED, request_id, message, cls.__name__)

    def _newer_field(self, request_id: int, cls: type[object], name: str, needed: int) -> Violation:
        message = (
            f"{cls.__name__}.{name} needs protocol version {needed}; "
            f"this connection agreed on {self.version}"
        )
        return self._violation(ViolationKind.NOT_ALLOWED, request_id, message, cls.__name__)

    def _not_hello(self, request_id: int, name: str) -> Violation:
        message = f"the first frame must be Hello, not {name}"
        return self._violation(ViolationKind.HELLO_FIRST, request_id, message, name)

    def _hello(self, request_id: int, value: cf.FrameValue) -> Event:
        name = type(value).__name__
        if not isinstance(value, cf.Hello):
            return self._not_hello(request_id, name)
        version = min(value.max_version, cf.PROTOCOL_VERSION)
        if version < max(value.min_version, cf.MIN_PROTOCOL_VERSION):
            message = (
                f"client speaks versions {value.min_version}..{value.max_version}; "
                f"this queue manager speaks {cf.MIN_PROTOCOL_VERSION}..{cf.PROTOCOL_VERSION}"
            )
            return self._violation(ViolationKind.UNSUPPORTED_VERSION, request_id, message, name)
        self.greeted = True
        self.version = version
        settings = self.settings
        reply = cf.HelloOk(
            version=version,
            server_version=settings.server_version,
            qm_name=settings.qm_name,
            qm_guid=settings.qm_guid,
        )
        self.send(request_id, reply)
        return Greeted(value.client_name, version, self._admit())

    def _admit(self) -> bool:
        """Admit the connection if it may be now; True if this admitted it."""
        if self.admitted or not self.greeted:
            return False
        if self.settings.auth_required and self.principal is None:
            return False
        self.admitted = True
        return True

    def _violation(
        self, kind: ViolationKind, request_id: int, message: str, request: str = ""
    ) -> Violation:
        code = _VIOLATION_CODES.get(kind, cf.ErrorCode.BAD_REQUEST)
        self.send(request_id, cf.ErrorReply(code=code, message=message))
        violation = Violation(kind, request_id, message, request)
        self._closed = Closed(violation.reason)
        return violation

    # ------------------------------------------------------------------ output

    def send(self, request_id: int, reply: cf.ServerReply) -> None:
        """Put a reply in the outbox (as :meth:`encode_reply` encodes it)."""
        self.send_bytes(self.encode_reply(request_id, reply))

    def encode_reply(self, request_id: int, reply: cf.ServerReply) -> bytes:
        """The frame of a reply; one too large for a frame of this connection is
        answered ``LIMIT_EXCEEDED`` instead, saying so."""
        try:
            return cf.encode_frame(
                request_id, reply, max_body=cf.max_reply_body(reply, self.version)
            )
        except cf.FrameTooLarge as exc:
            return cf.encode_frame(request_id, _too_large(reply, exc, self.version))

    def send_bytes(self, frame: bytes) -> None:
        """Put a reply frame that is already encoded in the outbox."""
        self.outbox.append(frame)
        self.outbox_bytes += len(frame)

    def data_to_send(self) -> bytes:
        """Everything in the outbox, as one write; the outbox is empty afterwards."""
        data = b"".join(self.outbox)
        self.outbox.clear()
        self.outbox_bytes = 0
        return data

    @property
    def outbox_full(self) -> bool:
        """True when the outbox should be written before more requests are run."""
        return self.outbox_bytes > self.settings.flush_bytes

    def farewell(self, reason: str, code: cf.ErrorCode = cf.ErrorCode.LIMIT_EXCEEDED) -> None:
        """End the connection for ``reason`` (a deadline, a limit, an eviction, the
        daemon stopping): an ``ErrorReply(code)`` about the connection itself
        (request id 0) goes into the outbox, and the connection is closed."""
        self.send(0, cf.ErrorReply(code=code, message=reason))
        self._closed = Closed(reason)

    @property
    def closed(self) -> bool:
        """True once the connection is over (a violation, a farewell, or the client's close)."""
        return self._closed is not None

    # ------------------------------------------------------------------ deadlines

    def deadline(self, *, busy: bool) -> float:
        """When the next read must have come; ``busy``: the connection has open
        transactions or waiting receives."""
        settings = self.settings
        if not self.admitted:
            return self.opened_at + settings.hello_timeout
        if self.frame_started is not None:
            return self.frame_started + settings.frame_timeout
        if not busy:
            return self.last_read + settings.idle_timeout
        return math.inf

    def deadline_reason(self) -> str:
        """Why a connection that missed :meth:`deadline` is closed."""
        settings = self.settings
        if not self.greeted:
            return f"no Hello within {settings.hello_timeout:g} s"
        if not self.admitted:
            return f"not authenticated within {settings.hello_timeout:g} s of connecting"
        if self.frame_started is not None:
            return f"a frame did not arrive whole within {settings.frame_timeout:g} s"
        return f"closing a connection idle for {settings.idle_timeout:g} s"

    def idle_since(self, *, busy: bool) -> float | None:
        """When the connection last received bytes, if it is greeted and not
        ``busy``; else None (it may not be evicted as idle)."""
        if not self.greeted or busy:
            return None
        return self.last_read


def _too_large(reply: cf.ServerReply, exc: cf.FrameTooLarge, version: int) -> cf.ErrorReply:
    """The error that answers a request whose reply cannot be sent in one frame,
    with what may help: a newer client, when the reply would fit its frames;
    else where else to read it."""
    message = (
        f"the reply ({type(reply).__name__}) would be {exc.size} bytes, over the "
        f"{exc.limit}-byte limit of a frame"
    )
    elsewhere = (
        "ask for one distribution list at a time (qmgr dl list NAME)"
        if isinstance(reply, cf.ListInfoList)
        else "read it over HTTP (/api/v1)"
    )
    if exc.size <= cf.max_reply_body(reply, cf.LARGE_LISTS_VERSION) and version < (
        cf.LARGE_LISTS_VERSION
    ):
        message += (
            f" at protocol version {version}: upgrade the client (from version "
            f"{cf.LARGE_LISTS_VERSION}, lists of up to {cf.MAX_LIST_FRAME_BODY} bytes), or "
            f"{elsewhere}"
        )
    else:
        message += f": {elsewhere}"
    return cf.ErrorReply(code=int(cf.ErrorCode.LIMIT_EXCEEDED), message=message)
