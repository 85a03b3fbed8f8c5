"""Small pieces every part of the client uses: addresses, why connecting failed, limits,
timeouts, version checks, attributes read through to another object, what a client
knows of its queue manager."""

from __future__ import annotations

import math
import operator
import os
import sys
import uuid
from typing import Any, ClassVar, Final, Generic, Self, TypeVar, cast, overload

from wire import client as cf
from wire.addresses import AddressError, split_host_port
from wire.text_fields import text_error

from ._exceptions import ConnectionLost, InvalidArgument, NotSupported

DEFAULT_ADDRESS: Final = "127.0.0.1:1802"
DEFAULT_PORT: Final = 1802
#: Pipelined transactional sends are written once this many bytes are buffered,
#: so that the daemon decodes the first while the client packs the next.
PIPELINE_FLUSH_BYTES: Final = 16 * 1024
#: ... and once the oldest of them is this many seconds old (see ``ClientProtocol.flush_due``).
PIPELINE_FLUSH_AGE: Final = 1.0
#: The values of a send's time limit that mean "no limit": such a send may wait
#: in the pipeline (one with a limit goes at once: the daemon times it from its read).
NO_TIME_LIMIT: Final = (None, math.inf)
#: Size of one read from the socket.
RECEIVE_SIZE: Final = 1024 * 1024
#: Longest finite wait the protocol can express, in milliseconds.
MAX_TIMEOUT_MS: Final = cf.INFINITE_TIMEOUT_MS - 1

#: ``qm_guid`` before the handshake.
NO_GUID: Final = uuid.UUID(int=0)
#: Largest transaction id a client chooses (the daemon's own ids lie above).
MAX_CLIENT_TX_ID: Final = cf.CLIENT_TX_ID_LIMIT - 1

_INFINITE: Final = 0xFFFFFFFF

#: What ``transactional=`` maps to in ``Send.mode`` (see ``qmgr.core.engine.SendMode``).
SEND_MODES: Final = {None: 0, False: 1, True: 2}

#: ``ControlOutgoing.action`` values (see ``qmgr.server.client.services.OutgoingAction``).
OUTGOING_PAUSE: Final = 1
OUTGOING_RESUME: Final = 2
OUTGOING_PURGE: Final = 3


def default_client_name() -> str:
    """The name a client gives the daemon unless told otherwise: program[pid]."""
    program = os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else "python"
    return f"{program}[{os.getpid()}]"


#: An address ``unix:/run/qmgr/qmgr.sock`` names the daemon's Unix-domain socket.
UNIX_PREFIX: Final = "unix:"


def unix_path(address: str) -> str | None:
    """The socket path of a ``unix:PATH`` address, or None for ``HOST:PORT``."""
    text = address.strip()
    return text[len(UNIX_PREFIX) :] if text.startswith(UNIX_PREFIX) else None


def check_transport(address: str, tls: object) -> None:
    """Refuse TLS on the Unix-domain socket, which never speaks it (the daemon's
    ``server.unix_socket`` knows its clients by their user instead).

    Raises:
        InvalidArgument: ``tls`` was given with a ``unix:PATH`` address.
    """
    if tls is not None and unix_path(address) is not None:
        msg = (
            f"{address.strip()} is the queue manager's Unix-domain socket, which does not "
            "use TLS: connect to it without tls="
        )
        raise InvalidArgument(msg)


#: What the requests of ``TWO_PHASE_VERSION`` give (``NotSupported`` names it).
TWO_PHASE_USE: Final = "global transactions, remove_through() and measure_range()"


def require_version(version: int, needed: int, address: str, what: str, use: str = "") -> None:
    """Raise unless the connection's protocol ``version`` is at least ``needed``.

    Raises:
        NotSupported: the daemon is older than ``what`` (the message says which
            version it speaks and, with ``use``, what upgrading gives).
    """
    if version < needed:
        msg = (
            f"{what} needs a queue manager that speaks protocol version {needed}; "
            f"the one at {address} speaks version {version}"
        )
        raise NotSupported(msg + (f": upgrade it to use {use}" if use else ""))


def parse_address(address: str) -> tuple[str, int]:
    """Split ``HOST:PORT`` (a bare ``HOST`` means port 1802, a bare ``:PORT``
    the local host), by the daemon's own address rule.

    An IPv6 address with a port is written in brackets, ``[::1]:1802``. Text
    with more than one colon and no brackets is taken whole as an IPv6 address
    on port 1802 (``::1``), and refused when it is not one (``::1:28002``).

    Raises:
        InvalidArgument: the port is not a number from 1 to 65535, an
            unterminated ``[``, brackets around something that is not an IPv6
            address, or an IPv6 address and a port without brackets (a
            ``ValueError``; the message says to write ``[addr]:port``).
    """
    try:
        host, port = split_host_port(address.strip(), address)
    except AddressError as exc:
        raise InvalidArgument(str(exc)) from None
    return host or "127.0.0.1", DEFAULT_PORT if port is None else port


def check_token(token: str | None) -> None:
    """Refuse, before connecting, a ``token`` that cannot be sent (None: no token).

    Raises:
        InvalidArgument: it is not valid Unicode text, or too long to send.
    """
    error = text_error("token", token)
    if error is not None:
        raise InvalidArgument(error.message)


#: A connect timeout at or above this many seconds is no bound (the socket's limit).
_NO_BOUND: Final = 1e9


def connect_timeout(timeout: float | None) -> float | None:
    """``connect(timeout=...)`` as the socket takes it: None, or seconds > 0.

    Raises:
        InvalidArgument: not None nor a number of seconds above 0.
    """
    if timeout is None:
        return None
    given: object = timeout  # what a caller passed, whatever its annotation says
    if not isinstance(given, int | float) or isinstance(given, bool) or not timeout > 0:
        msg = f"timeout must be None or a number of seconds above 0, not {timeout!r}"
        raise InvalidArgument(msg)
    return None if timeout >= _NO_BOUND else float(timeout)


def cannot_connect(where: str, reason: str) -> ConnectionLost:
    """The error of a connection to the daemon at ``where`` that could not be made."""
    return ConnectionLost(f"cannot connect to the queue manager at {where}: {reason}")


def connect_failure(exc: OSError) -> str:
    """Why connecting failed, in words (trio wraps the attempts' errors in a group)."""
    cause = exc.__cause__
    if isinstance(cause, BaseExceptionGroup):
        for inner in cause.exceptions:
            if isinstance(inner, OSError) and inner.strerror:
                return inner.strerror.lower()
    return (exc.strerror or str(exc)).lower()


def timeout_ms(timeout: float | None) -> int:
    """Seconds (``None`` for ever) as the protocol's milliseconds."""
    if timeout is None:
        return _INFINITE
    given: object = timeout  # what a caller passed, whatever its annotation says
    if not isinstance(given, int | float) or isinstance(given, bool):
        msg = f"timeout must be None or a number of seconds, not {given!r}"
        raise InvalidArgument(msg)
    if timeout != timeout or timeout < 0:  # NaN or negative
        msg = f"timeout must be None or a number of seconds >= 0, not {timeout!r}"
        raise InvalidArgument(msg)
    if timeout == 0:
        return 0
    if timeout * 1000 >= MAX_TIMEOUT_MS:
        return MAX_TIMEOUT_MS
    return math.ceil(timeout * 1000)


T = TypeVar("T")


class ReadThrough(Generic[T]):
    """A read-only attribute that is the field of the same name (or ``field``) of
    the object its instance keeps in the attribute ``via`` (set by a subclass):
    ``Message.label`` is ``message.properties.label``.

    It declares the attribute and its type; when the class is made it puts a
    plain ``property`` in its place (``operator.attrgetter`` of the dotted
    path), which reads faster than a ``__get__`` written in Python and shows
    in ``help()`` as a read-only property."""

    via: ClassVar[str]

    def __init__(self, doc: str, field: str = "") -> None:
        self.__doc__ = doc
        self._field = field

    def __set_name__(self, owner: type, name: str) -> None:
        self._field = self._field or name
        read = operator.attrgetter(f"{self.via}.{self._field}")
        setattr(owner, name, property(read, doc=self.__doc__))

    @overload
    def __get__(self, instance: None, owner: type) -> Self: ...
    @overload
    def __get__(self, instance: object, owner: type) -> T: ...
    def __get__(self, instance: object | None, owner: type) -> Self | T:
        if instance is None:
            return self
        kept: Any = getattr(instance, self.via)
        return cast(T, getattr(kept, self._field))


class QueueManagerIdentity:
    """What both queue manager classes (``QueueManager``, ``AsyncQueueManager``) know
    of the queue manager they are connected to: its address, and what the handshake
    told (until then, the defaults here); they add the calls."""

    address: str
    qm_name: str = ""
    qm_guid: uuid.UUID = NO_GUID
    server_version: str = ""
