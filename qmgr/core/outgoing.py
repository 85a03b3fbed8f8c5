"""Outgoing queues: where messages for queues on other queue managers wait.

Theory of operation
-------------------
A send to ``DIRECT=TCP:10.0.0.5:1801\\private$\\orders`` cannot be written to
the remote queue; its commit appends the message, in the same write
transaction as the commit's local effects, to the *outgoing queue* of that
destination, a store queue of kind ``OUTGOING`` created on first use. The
peering layer delivers what waits there and forgets each message once the
next hop (or, for exactly-once delivery, the final destination) has it.

There is one outgoing queue per destination queue: its canonical name is
``outgoing$;<protocol>:<host>:<port>\\<queue>`` (lower case), and the MSMQ
direct name it sends to is ``<PROTOCOL>:<host>[:<port>]\\private$\\<queue>``
(the port is written only when it is not 1801).

An outgoing queue's message is an *entry* (appended by
:meth:`RemoteDestination.append_entry`): two bytes, then either

* ``LOCAL``: the message as this queue manager keeps it
  (``wire.MessageProperties``), sent with a TransactionHeader numbered here
  when it is transactional; or
* ``RELAYED``: the whole MSMQ packet of a message passing through on its way
  to another queue manager, hop count already incremented, TransactionHeader
  untouched (store and forward does no sequence processing). It is appended
  with its *relay id* (``arrivals.relay_id``), which the store indexes while
  the entry is there, so that a resend of a message still held here is
  known (``Arrivals.held``) and not stored again.

Entry layout::

    off  size  field
      0     1  kind       1 LOCAL, 2 RELAYED
      1     1  flags      bit 0 transactional, bit 1 recoverable
      2        the message properties (LOCAL) or the packet (RELAYED)
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Final

from storage import AppendOutgoing
from wire import quoted

from .names import DEFAULT_PEER_PORT, QueueAddress
from .routes import endpoint_text

__all__ = [
    "OUTGOING_PREFIX",
    "EntryOrigin",
    "OutgoingEntry",
    "RemoteDestination",
    "decode_entry",
    "endpoint_of",
    "entry_prefix",
]

#: Canonical names of outgoing queues start with this.
OUTGOING_PREFIX: Final = "outgoing$;"
_TRANSACTIONAL: Final = 0x01
_RECOVERABLE: Final = 0x02


class EntryOrigin(enum.IntEnum):
    """Where an outgoing entry came from."""

    LOCAL = 1
    RELAYED = 2


# Calling an enum class is slow next to a dict lookup, and this is per message.
_ORIGINS: Final = {origin.value: origin for origin in EntryOrigin}


@dataclass(frozen=True, slots=True)
class RemoteDestination:
    """A queue on another queue manager, as a send names it."""

    #: ``OS`` or ``TCP``.
    protocol: str
    #: Host name or address, lower case.
    host: str
    #: The peer port (1801 when the name gave none).
    port: int
    #: The queue's canonical key on its queue manager.
    queue: str

    @classmethod
    def from_address(cls, address: QueueAddress) -> RemoteDestination:
        """The destination of a parsed remote element."""
        assert address.protocol is not None
        assert address.host is not None
        return cls(address.protocol, address.host, address.port or DEFAULT_PEER_PORT, address.queue)

    @property
    def outgoing_name(self) -> str:
        """Canonical name of the outgoing queue for this destination."""
        return f"{OUTGOING_PREFIX}{self.protocol.lower()}:{self.host}:{self.port}\\{self.queue}"

    @property
    def direct_name(self) -> str:
        """The MSMQ direct name (without ``DIRECT=``) carried in packets."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        port = "" if self.port == DEFAULT_PEER_PORT else f":{self.port}"
        return f"{self.protocol}:{host}{port}\\private$\\{self.queue}"

    @property
    def display_name(self) -> str:
        """The format name users see: ``DIRECT=...``."""
        return "DIRECT=" + self.direct_name

    @property
    def endpoint(self) -> tuple[str, int]:
        """The destination queue manager's host and peer port."""
        return self.host, self.port

    @property
    def endpoint_text(self) -> str:
        """The destination queue manager's ``host:port`` as written (``[v6]:port``)."""
        return endpoint_text(self.host, self.port)

    def append_entry(
        self,
        origin: EntryOrigin,
        data: bytes | memoryview,
        size: int,
        *,
        transactional: bool,
        recoverable: bool,
        deadline: float | None = None,
        relay: bytes = b"",
    ) -> AppendOutgoing:
        """The operation appending an entry (``data`` behind its two bytes) to this
        destination's outgoing queue; ``size`` is its body's (see ``storage``);
        ``relay``, a relayed message's relay id (``arrivals.relay_id``), which
        the store indexes while the entry is there."""
        prefix = entry_prefix(origin, transactional=transactional, recoverable=recoverable)
        return AppendOutgoing(
            self.outgoing_name,
            self.display_name,
            (prefix, data),
            size,
            deadline=deadline,
            relay=relay,
        )

    @classmethod
    def from_outgoing_name(cls, name: str) -> RemoteDestination:
        """Parse an outgoing queue's canonical name back.

        Raises:
            ValueError: it is not one.
        """
        if not name.startswith(OUTGOING_PREFIX):
            msg = f"{quoted(name)} is not an outgoing queue name"
            raise ValueError(msg)
        rest = name[len(OUTGOING_PREFIX) :]
        endpoint, sep, queue = rest.partition("\\")
        protocol, _, host_port = endpoint.partition(":")
        host, _, port = host_port.rpartition(":")
        if not sep or not queue or not host or not port.isdigit():
            msg = f"{quoted(name)} is not an outgoing queue name"
            raise ValueError(msg)
        return cls(protocol.upper(), host, int(port), queue)


@dataclass(frozen=True, slots=True)
class OutgoingEntry:
    """An outgoing queue's message, decoded from its stored payload."""

    origin: EntryOrigin
    transactional: bool
    recoverable: bool
    #: The message properties (LOCAL) or the MSMQ packet (RELAYED).
    data: memoryview


def entry_prefix(origin: EntryOrigin, *, transactional: bool, recoverable: bool) -> bytes:
    """The two bytes that begin an entry."""
    flags = (_TRANSACTIONAL if transactional else 0) | (_RECOVERABLE if recoverable else 0)
    return bytes((origin, flags))


def decode_entry(payload: bytes | memoryview) -> OutgoingEntry:
    """Decode an entry's payload.

    Raises:
        ValueError: it is not an outgoing entry.
    """
    view = memoryview(payload)
    origin = _ORIGINS.get(view[0]) if len(view) >= 2 else None
    if origin is None:
        msg = "not an outgoing-queue entry"
        raise ValueError(msg)
    flags = view[1]
    return OutgoingEntry(
        origin,
        bool(flags & _TRANSACTIONAL),
        bool(flags & (_RECOVERABLE | _TRANSACTIONAL)),
        view[2:],
    )


def endpoint_of(outgoing_name: str) -> str:
    """``host:port`` (``[v6]:port``) of the queue manager an outgoing queue's
    messages go to; "" for a name that is not an outgoing queue's."""
    try:
        return RemoteDestination.from_outgoing_name(outgoing_name).endpoint_text
    except ValueError:
        return ""
