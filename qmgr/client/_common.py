"""Pieces shared by the blocking and the trio client: addresses, frames, conversions.

Request frames other than ``Send`` (see ``_codec``) are encoded by
``wire.client_frames.encode_frame``; a value it cannot encode becomes an
:class:`InvalidArgument` that says which field was wrong.
"""

from __future__ import annotations

import math
import os
import sys
import uuid
from typing import Final

from wire import LocalProtocolError
from wire import client_frames as cf
from wire.client_frames import Delivery

from ._errors import (
    ConnectionLost,
    InvalidArgument,
    QueueError,
    TransactionNotFound,
    error_from_reply,
)
from ._message import Message

DEFAULT_ADDRESS: Final = "127.0.0.1:1802"
DEFAULT_PORT: Final = 1802
#: Pipelined transactional sends are written once this many bytes are buffered.
PIPELINE_FLUSH_BYTES: Final = 256 * 1024
#: Size of one read from the socket.
RECEIVE_SIZE: Final = 1024 * 1024
#: Longest finite wait the protocol can express, in milliseconds.
MAX_TIMEOUT_MS: Final = cf.INFINITE_TIMEOUT_MS - 1

#: ``qm_guid`` before the handshake.
NO_GUID: Final = uuid.UUID(int=0)
#: Largest transaction id a client chooses (the daemon's own ids lie above).
MAX_CLIENT_TX_ID: Final = cf.CLIENT_TX_ID_LIMIT - 1

_INFINITE: Final = 0xFFFFFFFF

_DELIVERY_NAMES: Final = {
    "recoverable": int(Delivery.RECOVERABLE),
    "express": int(Delivery.EXPRESS),
}

#: What ``transactional=`` maps to in ``Send.mode`` (see ``qmgr.core.engine.SendMode``).
SEND_MODES: Final = {None: 0, False: 1, True: 2}


def default_client_name() -> str:
    """The name a client gives the daemon unless told otherwise: program[pid]."""
    program = os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else "python"
    return f"{program}[{os.getpid()}]"


def parse_address(address: str) -> tuple[str, int]:
    """Split ``HOST:PORT`` (``[v6]:PORT``; a bare ``HOST`` means port 1802).

    Raises:
        ValueError: the port is not a number from 1 to 65535.
    """
    text = address.strip()
    if text.startswith("["):
        host, _, rest = text[1:].partition("]")
        port_text = rest[1:] if rest.startswith(":") else ""
        if rest and not rest.startswith(":"):
            msg = f"expected [IPv6]:PORT, got {address!r}"
            raise ValueError(msg)
    elif text.count(":") == 1:
        host, _, port_text = text.partition(":")
    else:
        host, port_text = text, ""
    if not port_text:
        return host or "127.0.0.1", DEFAULT_PORT
    if not port_text.isdigit() or not 0 < int(port_text) < 65536:
        msg = f"expected HOST:PORT with a port from 1 to 65535, got {address!r}"
        raise ValueError(msg)
    return host or "127.0.0.1", int(port_text)


def timeout_ms(timeout: float | None) -> int:
    """Seconds (``None`` for ever) as the protocol's milliseconds."""
    if timeout is None:
        return _INFINITE
    if timeout != timeout or timeout < 0:  # NaN or negative
        msg = f"timeout must be None or a number of seconds >= 0, not {timeout!r}"
        raise InvalidArgument(msg)
    if timeout == 0:
        return 0
    if timeout * 1000 >= MAX_TIMEOUT_MS:
        return MAX_TIMEOUT_MS
    return math.ceil(timeout * 1000)


def encode(request_id: int, value: cf.ClientRequest) -> bytes:
    """Encode a request frame; a value that cannot be encoded is an :class:`InvalidArgument`."""
    try:
        return cf.encode_frame(request_id, value)
    except LocalProtocolError as exc:
        msg = f"cannot send this request: {exc}"
        raise InvalidArgument(msg) from None


def message_or_none(reply: cf.ServerReply) -> Message | None:
    """The result of a receive or peek reply."""
    if type(reply) is cf.MessageReply:
        return Message.from_wire(reply.message)
    if type(reply) is cf.NoMessage:
        return None
    raise unexpected(reply, "MessageReply or NoMessage")


def expect_ok(reply: cf.ServerReply) -> int:
    """The value of an ``Ok`` reply."""
    if type(reply) is cf.Ok:
        return reply.value
    raise unexpected(reply, "Ok")


def unexpected(reply: cf.ServerReply, wanted: str) -> QueueError:
    """The error for a reply of the wrong kind (a daemon bug or a version mismatch)."""
    name = type(reply).__name__
    return ConnectionLost(f"protocol error: the queue manager answered {name}, not {wanted}")


class TransactionState:
    """What both transaction classes track: the id, whether it ended, a pipelined failure.

    A transactional send is pipelined: its reply is read later. When a reply
    says the send failed, :meth:`fail` records the first such error; every
    later call on the transaction raises it (:meth:`check`), and ``commit()``
    aborts instead of committing.
    """

    __slots__ = ("_error", "ended", "id")

    def __init__(self, tx_id: int) -> None:
        #: The daemon's id for the transaction.
        self.id = tx_id
        self.ended = False
        self._error: tuple[int, str] | None = None

    @property
    def failed(self) -> bool:
        """True once a pipelined send of this transaction has failed."""
        return self._error is not None

    def fail(self, code: int, message: str) -> None:
        """Record a failed pipelined send (the first one wins)."""
        if self._error is None:
            self._error = (code, message)

    def error(self, prefix: str = "") -> QueueError:
        """The recorded failure as an exception (a fresh one each time)."""
        assert self._error is not None
        code, message = self._error
        return error_from_reply(code, prefix + message)

    def check(self) -> None:
        """Raise if the transaction ended or a pipelined send failed."""
        if self.ended:
            msg = f"transaction {self.id} has already ended"
            raise TransactionNotFound(msg)
        if self._error is not None:
            msg_0 = f"a send in transaction {self.id} failed, so it cannot commit: "
            raise self.error(msg_0)

    def commit_error(self) -> QueueError:
        """The error ``commit()`` raises after aborting a transaction with a failed send."""
        return self.error(f"transaction {self.id} was aborted because a send in it failed: ")
