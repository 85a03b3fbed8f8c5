"""Queue names and MSMQ format names.

Theory of operation
-------------------
Users name queues the way MSMQ does. A *queue name* is the private queue's
own name (``orders``): at most 124 characters, none of ``\\ ; + , "``, no
control characters, compared case-insensitively. Names ending in ``$`` are
reserved for the queue manager (``order_queue$`` and friends).

A *format name* says where a message goes. Accepted forms:

* ``orders``, ``.\\private$\\orders``, ``private$\\orders``
* ``DIRECT=OS:.\\private$\\orders`` (also with this host's name)
* ``DIRECT=OS:host[:port]\\private$\\q`` and ``DIRECT=TCP:addr[:port]\\private$\\q``
  (``:port`` is our extension so that several queue managers can share a host;
  without it the peer port is 1801)
* system queues ``system$;deadletter`` and ``system$;deadxact`` (also as
  ``.\\system$;...`` or behind ``DIRECT=OS:.\\``), journals ``NAME;journal``,
  and the subqueues ``NAME;retry`` and ``NAME;poison`` (MSMQ 4.0) of a queue
* a multiple-element name: several of the above separated by commas.

Parsing is pure: whether ``host`` is this machine is decided by the caller's
:class:`LocalIdentity`. The canonical key of a local queue is its lower-case
name with the suffix: ``orders``, ``orders;journal``, ``system$;deadletter``.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass, field
from typing import Final

from wire import addresses, quoted

from .errors import InvalidName

MAX_QUEUE_NAME: Final = 124
DEFAULT_PEER_PORT: Final = 1801
FORBIDDEN_CHARACTERS: Final = frozenset('\\;+,"')
#: The address a connection to ``0.0.0.0`` (version 4) or ``::`` (6) reaches.
_LOOPBACK: Final[dict[int, ipaddress.IPv4Address | ipaddress.IPv6Address]] = {
    4: ipaddress.IPv4Address("127.0.0.1"),
    6: ipaddress.IPv6Address("::1"),
}
DEADLETTER: Final = "system$;deadletter"
DEADXACT: Final = "system$;deadxact"
#: The system journal: copies of confirmed messages this queue manager sent
#: with MQMSG_JOURNAL (MSMQ's machine journal).
SYSTEM_JOURNAL: Final = "system$;journal"
SYSTEM_QUEUES: Final = (DEADLETTER, DEADXACT, SYSTEM_JOURNAL)
JOURNAL_SUFFIX: Final = ";journal"
#: The subqueues every queue has (MSMQ 4.0; WCF's names): poison handling moves
#: messages there; nothing is sent to them.
RETRY_SUFFIX: Final = ";retry"
POISON_SUFFIX: Final = ";poison"
SUBQUEUE_SUFFIXES: Final = (RETRY_SUFFIX, POISON_SUFFIX)
#: A distribution list kept by this queue manager: ``DL=name``.
DL_PREFIX: Final = "DL="
#: What an error calls a distribution list's name (``what`` of :func:`validate_queue_name`).
LIST_NAME: Final = "distribution list name"
#: Format names that need a directory service (refused, and never queue names).
DIRECTORY_PREFIXES: Final = ("PUBLIC=", "PRIVATE=", "MACHINE=", "MULTICAST=", "CONNECTOR=")
#: What a format name begins with: a bare name beginning so is read as one.
FORMAT_NAME_PREFIXES: Final = ("DIRECT=", DL_PREFIX, *DIRECTORY_PREFIXES)


def validate_new_queue_name(name: str) -> str:
    """:func:`validate_queue_name` for a queue about to be created, which must
    also not read as a format name (``DL=x``, ``DIRECT=...``): every other
    command would take it for one. (A list is always named through ``DL=``.)

    Raises:
        InvalidName: see :func:`validate_queue_name`, or it begins as a format name.
    """
    key = validate_queue_name(name)
    upper = name.upper()
    for prefix in FORMAT_NAME_PREFIXES:
        if upper.startswith(prefix):
            msg = (
                f"queue name {quoted(name)} begins as a format name ({prefix}); "
                "commands would read it as one: choose another name"
            )
            raise InvalidName(msg)
    return key


def validate_queue_name(name: str, what: str = "queue name") -> str:
    """Check a private queue's name (or a distribution list's: ``what`` says which,
    for the error) and return its canonical (lower-case) key.

    Raises:
        InvalidName: empty, too long, a forbidden or control character, or a
            reserved ``$`` suffix.
    """
    if not name:
        msg = f"a {what} cannot be empty"
        raise InvalidName(msg)
    if len(name) > MAX_QUEUE_NAME:
        msg = f"{what} is {len(name)} characters long; the limit is {MAX_QUEUE_NAME}"
        raise InvalidName(msg)
    bad = sorted({ch for ch in name if ch in FORBIDDEN_CHARACTERS})
    if bad:
        msg = f"{what} {quoted(name)} contains {' '.join(bad)}, which {what}s cannot hold"
        raise InvalidName(msg)
    if any(ord(ch) < 0x20 or ord(ch) == 0x7F for ch in name):
        msg = f"{what} {quoted(name)} contains a control character"
        raise InvalidName(msg)
    if name != name.strip():
        msg = f"{what} {quoted(name)} starts or ends with white space"
        raise InvalidName(msg)
    if name.endswith("$"):
        msg = f"{what} {quoted(name)} ends with '$', which is reserved for system queues"
        raise InvalidName(msg)
    return name.lower()


@dataclass(frozen=True, slots=True)
class LocalIdentity:
    """What counts as "this queue manager" in a format name."""

    host_names: frozenset[str] = field(default_factory=lambda: frozenset({"localhost"}))
    addresses: frozenset[str] = field(default_factory=lambda: frozenset({"127.0.0.1", "::1"}))
    peer_port: int = DEFAULT_PEER_PORT
    #: The peer listener takes every address of the host (``0.0.0.0`` or ``::``): then
    #: every loopback address with our port is this queue manager too.
    listens_everywhere: bool = False
    #: Other (lower-case host, port) this queue manager is reached at (``server.aliases``:
    #: a port map, a NAT, a DNS name); port None stands for :attr:`peer_port`.
    aliases: frozenset[tuple[str, int | None]] = frozenset()

    def __post_init__(self) -> None:
        # Names, addresses and aliases compare in one spelling (``FD55:0::2`` is
        # ``fd55::2``, ``qm1.example.`` is ``qm1.example``).
        object.__setattr__(self, "host_names", frozenset(map(canonical_host, self.host_names)))
        object.__setattr__(self, "addresses", frozenset(map(canonical_host, self.addresses)))
        aliases = frozenset((canonical_host(host), port) for host, port in self.aliases)
        object.__setattr__(self, "aliases", aliases)

    def is_local(self, host: str, port: int | None) -> bool:
        """True if ``host[:port]`` (as written after ``DIRECT=TCP:`` or ``DIRECT=OS:``)
        names this QM; an address in any of its spellings, a name in any case.

        A name or an address means the same after either protocol (both connect
        to it), and ``0.0.0.0`` and ``::`` stand for the loopback address a
        connection to them reaches."""
        canonical = canonical_host(host)
        if self.aliases and self._is_alias(canonical, port):
            return True
        if port is not None and port != self.peer_port:
            return False
        if host == "." or canonical in self.host_names:
            return True
        try:
            address = ipaddress.ip_address(canonical)
        except ValueError:
            return False
        reached = _LOOPBACK[address.version] if address.is_unspecified else address
        return str(reached) in self.addresses or (self.listens_everywhere and reached.is_loopback)

    def _is_alias(self, host: str, port: int | None) -> bool:
        for alias_host, alias_port in self.aliases:
            if alias_host != host:
                continue
            if alias_port is None:
                if port is None or port == self.peer_port:
                    return True
            elif port == alias_port or (port is None and alias_port == DEFAULT_PEER_PORT):
                return True
        return False


def canonical_host(host: str) -> str:
    """A host as hosts are compared: an IP address in its one standard spelling
    (brackets taken off, IPv6 compressed and in lower case, an IPv4-mapped IPv6
    address as the IPv4 address it maps), a name in lower case without the dot
    that may end a fully qualified name."""
    try:
        address = ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return host.lower().rstrip(".") or host
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return str(address.ipv4_mapped)
    return str(address)


@dataclass(frozen=True, slots=True)
class QueueAddress:
    """One destination of a format name."""

    #: Canonical key of the queue on its queue manager (``orders;journal``).
    queue: str
    #: The element as the user wrote it.
    text: str
    #: For a remote queue, the protocol (``OS``/``TCP``), host and port; ``None`` if local.
    protocol: str | None = None
    host: str | None = None
    port: int | None = None
    #: True for ``DL=name``: ``queue`` is then the list's canonical name.
    distribution_list: bool = False

    @property
    def is_local(self) -> bool:
        """True when the queue lives on this queue manager."""
        return self.host is None and not self.distribution_list

    @property
    def is_system(self) -> bool:
        """True for the dead-letter queues."""
        return self.queue in SYSTEM_QUEUES

    @property
    def is_journal(self) -> bool:
        """True for a journal queue."""
        return self.queue.endswith(JOURNAL_SUFFIX)

    @property
    def is_subqueue(self) -> bool:
        """True for a subqueue (``NAME;retry``, ``NAME;poison``)."""
        return self.queue.endswith(SUBQUEUE_SUFFIXES)


@dataclass(frozen=True, slots=True)
class FormatName:
    """A parsed format name: one element, or several for a multiple-element name."""

    elements: tuple[QueueAddress, ...]

    @property
    def is_multiple(self) -> bool:
        """True for a comma-separated multiple-element name."""
        return len(self.elements) > 1


def parse_format_name(text: str, identity: LocalIdentity | None = None) -> FormatName:
    """Parse a destination as users write it.

    Raises:
        InvalidName: the text is not a format name we understand; the message
            names the element and what was wrong with it.
    """
    identity = identity or LocalIdentity()
    if not text or not text.strip():
        msg = "a format name cannot be empty"
        raise InvalidName(msg)
    parts = [part.strip() for part in text.split(",")]
    elements = tuple(_parse_element(part, identity) for part in parts)
    if len(elements) > 1:
        for element in elements:
            if element.is_system or element.is_journal or element.is_subqueue:
                msg = (
                    f"{quoted(element.text)}: a multiple-element name cannot contain "
                    "journal or dead-letter queues or subqueues"
                )
                raise InvalidName(msg)
        # Duplicate destinations collapse (case-insensitively), as MSMQ does.
        seen: dict[tuple[bool, str | None, str | None, int | None, str], QueueAddress] = {}
        for element in elements:
            key = (
                element.distribution_list,
                element.protocol,
                element.host,
                element.port,
                element.queue,
            )
            seen.setdefault(key, element)
        elements = tuple(seen.values())
    return FormatName(elements)


def parse_queue_reference(text: str, identity: LocalIdentity | None = None) -> QueueAddress:
    """Parse a single local queue reference (for receive, peek, purge, ...).

    Raises:
        InvalidName: not a single element, or not a queue on this queue manager.
    """
    address = parse_one_queue(
        text,
        identity,
        several=" names several queues; this operation takes one",
        listed=" names a distribution list; this operation takes a queue",
    )
    if not address.is_local:
        msg = f"{quoted(text)} is a queue on another host; only local queues can be read"
        raise InvalidName(msg)
    return address


def parse_one_queue(
    text: str, identity: LocalIdentity | None, *, several: str, listed: str
) -> QueueAddress:
    """Parse ``text`` as the name of one queue, on this queue manager or another.

    Raises:
        InvalidName: ``text`` does not parse, or it names several queues (the
            message is ``quoted(text)`` followed by ``several``) or a distribution
            list (``quoted(text)`` followed by ``listed``).
    """
    name = parse_format_name(text, identity)
    if name.is_multiple:
        msg = f"{quoted(text)}{several}"
        raise InvalidName(msg)
    address = name.elements[0]
    if address.distribution_list:
        msg = f"{quoted(text)}{listed}"
        raise InvalidName(msg)
    return address


def _parse_element(text: str, identity: LocalIdentity) -> QueueAddress:
    if not text:
        msg = "a multiple-element name has an empty element"
        raise InvalidName(msg)
    upper = text.upper()
    if upper.startswith("DIRECT="):
        return _parse_direct(text, identity)
    if upper.startswith(DL_PREFIX):
        name = validate_queue_name(text[len(DL_PREFIX) :].strip(), LIST_NAME)
        return QueueAddress(queue=name, text=text, distribution_list=True)
    for prefix in DIRECTORY_PREFIXES:
        if upper.startswith(prefix):
            msg = (
                f"{quoted(text)}: {prefix[:-1]} format names need a directory service; use DIRECT="
            )
            raise InvalidName(msg)
    # A path name: [host\]private$\q, [host\]system$;x, or a bare queue name.
    lowered = text.lower()
    if lowered.startswith(("private$\\", "system$;")):
        return QueueAddress(queue=_parse_queue_path(text, text), text=text)
    if "\\" in text:
        host, _, rest = text.partition("\\")
        if host != "." and not identity.is_local(host, None):
            msg = f"{quoted(text)}: a path name on another host needs DIRECT=OS:{host}\\..."
            raise InvalidName(msg)
        return QueueAddress(queue=_parse_queue_path(rest, text), text=text)
    return QueueAddress(queue=_parse_queue_path(text, text, bare=True), text=text)


def _parse_direct(text: str, identity: LocalIdentity) -> QueueAddress:
    body = text[len("DIRECT=") :]
    protocol, colon, rest = body.partition(":")
    protocol = protocol.upper()
    if not colon or protocol not in {"OS", "TCP"}:
        msg = f"{quoted(text)}: only DIRECT=OS: and DIRECT=TCP: are supported"
        raise InvalidName(msg)
    host_port, slash, path = rest.partition("\\")
    if not slash or not host_port:
        msg = f"{quoted(text)}: expected DIRECT={protocol}:host\\private$\\queue"
        raise InvalidName(msg)
    host, port = split_host_port(host_port, text)
    if len(host) > 253:
        msg = f"{quoted(text)}: the host is {len(host)} characters long; the limit is 253"
        raise InvalidName(msg)
    if protocol == "TCP" and host != ".":
        try:
            ipaddress.ip_address(host)
        except ValueError:
            msg = (
                f"{quoted(text)}: DIRECT=TCP: takes an IP address, not {quoted(host)} "
                "(use DIRECT=OS:)"
            )
            raise InvalidName(msg) from None
    elif host != "." and not is_host_name(host):
        msg = (
            f"{quoted(text)}: {quoted(host)} is not a host name (dot-separated labels of letters, "
            "digits, '-' and '_', at most 253 characters) nor an IP address"
        )
        raise InvalidName(msg)
    queue = _parse_queue_path(path, text)
    if identity.is_local(host, port):
        return QueueAddress(queue=queue, text=text)
    if queue in SYSTEM_QUEUES or queue.endswith((JOURNAL_SUFFIX, *SUBQUEUE_SUFFIXES)):
        msg = (
            f"{quoted(text)}: journal and dead-letter queues and subqueues on other hosts "
            "cannot be addressed"
        )
        raise InvalidName(msg)
    return QueueAddress(queue=queue, text=text, protocol=protocol, host=host.lower(), port=port)


#: One label of a host name: 1 to 63 letters (any script), digits, '-' and '_',
#: not beginning or ending with '-'.
_HOST_LABEL: Final = re.compile(r"(?!-)[\w-]{1,63}(?<!-)")


def is_host_name(host: str) -> bool:
    """Whether ``host`` (after ``DIRECT=OS:``) can name a computer: an IP
    address, or a host name a resolver may take (no space, no empty label, at
    most 253 characters)."""
    try:
        ipaddress.ip_address(host)
    except ValueError:
        pass
    else:
        return True
    labels = host.removesuffix(".").split(".")
    return len(host) <= 253 and all(_HOST_LABEL.fullmatch(label) for label in labels)


def split_host_port(
    host_port: str, text: str | None = None, *, port_zero: bool = False
) -> tuple[str, int | None]:
    """``HOST[:PORT]`` as the host as written and its port (None: none written),
    by the one address rule of :func:`wire.addresses.split_host_port`; ``text``
    is what error messages quote (default: ``host_port``).

    Args:
        port_zero: take port 0 too (a listening address: any free port).

    Raises:
        InvalidName: the address is not written as ``HOST[:PORT]`` (the message
            says why, and how to write an IPv6 address with a port).
    """
    try:
        return addresses.split_host_port(host_port, text, port_zero=port_zero)
    except addresses.AddressError as exc:
        raise InvalidName(str(exc)) from None


def _parse_queue_path(path: str, text: str, *, bare: bool = False) -> str:
    lowered = path.lower()
    if lowered in SYSTEM_QUEUES:
        return lowered
    if lowered.startswith("private$\\"):
        path = path[len("private$\\") :]
    elif not bare:
        msg = f"{quoted(text)}: expected private$\\<queue> or system$;deadletter|deadxact|journal"
        raise InvalidName(msg)
    suffix = ""
    for known in (JOURNAL_SUFFIX, *SUBQUEUE_SUFFIXES):
        if path.lower().endswith(known):
            path = path[: -len(known)]
            suffix = known
            break
    key = validate_queue_name(path)
    return key + suffix


def display_format_name(queue_key: str) -> str:
    """The path name users see for a local queue key."""
    if queue_key in SYSTEM_QUEUES:
        return ".\\" + queue_key
    return ".\\private$\\" + queue_key


def without_private_prefix(name: str) -> str:
    """A private queue's name without ``.\\private$\\`` or ``private$\\`` before it
    (in any case), as typed otherwise: the name a queue created as ``name`` has."""
    lowered = name.lower()
    for prefix in (".\\private$\\", "private$\\"):
        if lowered.startswith(prefix):
            return name[len(prefix) :]
    return name
