"""Where a message goes: from the format name a sender wrote to the queues that take it.

Theory of operation
-------------------
A send names its destination with a format name (``orders``,
``DIRECT=OS:.\\private$\\orders``, or several of them separated by commas);
its admin and response queues are format names too. :class:`Addressing`
parses them (remembering the answers: senders repeat themselves) and
resolves a destination to where each copy goes: a local application
queue's record, or, for a queue on another queue manager, a
:class:`~qmgr.core.outgoing.RemoteDestination` whose copy the commit appends
to that destination's outgoing queue. Journal and dead-letter queues and
subqueues take no sends. A send to a remote queue cannot be checked
against that queue (as in MSMQ): whether it exists, and is transactional,
is judged where it arrives. The requests that read or change one queue
here (receive, peek, purge, move, ...) name it by a *queue reference*,
which :meth:`Addressing.queue` resolves to its record. A message from
another queue manager names its queue as it arrived (``DIRECT=``);
:func:`arrival_address` says which queue that is here, for its arrival
(``arrivals``) and, should it die here, for its move back out of the
dead-letter queue (``moves``).

It reads the store's catalog and never writes it; errors are the core's own.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, TypeVar

from storage import QueueKind, QueueRecord, Store
from wire import quoted

from . import names
from .errors import AccessDenied, InvalidArgument, InvalidName, QueueNotFound
from .outgoing import RemoteDestination

__all__ = [
    "FORMAT_NAME_CACHE_SIZE",
    "MAX_DESTINATIONS",
    "Addressing",
    "MissingTarget",
    "Target",
    "arrival_address",
]


@dataclass(frozen=True, slots=True)
class MissingTarget:
    """A distribution list's target that names a local queue that no longer
    exists: that copy is dead-lettered (NACK_BAD_DST_Q), the send goes on."""

    text: str

    @property
    def display_name(self) -> str:
        """The target as the list names it."""
        return self.text


#: Where one copy of a send goes.
Target = QueueRecord | RemoteDestination | MissingTarget

#: Most queues one send reaches (its lists expanded).
MAX_DESTINATIONS: Final = 1000
#: Parsed format names remembered; the cache starts afresh when full.
FORMAT_NAME_CACHE_SIZE: Final = 4096


def arrival_address(
    name: str, identity: names.LocalIdentity, *, router: bool
) -> names.QueueAddress | None:
    """The queue a message from another queue manager, addressed to ``DIRECT=`` +
    ``name``, is for (local or not), or None when it names nothing this queue
    manager understands.

    A queue manager that is not a ``router`` takes every message that arrives
    as its own: the host and port its sender wrote only chose the connection,
    so only the queue path counts. A router judges them by ``identity``.
    """
    if not router:
        protocol, _, rest = name.partition(":")
        _, backslash, path = rest.partition("\\")
        if not backslash:
            return None
        name = f"{protocol}:.\\{path}"
    try:
        parsed = names.parse_format_name("DIRECT=" + name, identity)
    except InvalidName:
        return None
    if parsed.is_multiple:
        return None
    return parsed.elements[0]


_Parsed = TypeVar("_Parsed", names.FormatName, names.QueueAddress)


def _kept(cache: dict[str, _Parsed], text: str, parsed: _Parsed) -> _Parsed:
    """Keep ``parsed`` as what ``text`` parses to, in a cache of at most
    ``FORMAT_NAME_CACHE_SIZE`` entries (emptied when full); returns ``parsed``."""
    if len(cache) >= FORMAT_NAME_CACHE_SIZE:
        cache.clear()
    cache[text] = parsed
    return parsed


class Addressing:
    """Parses format names and resolves destinations against ``store``'s queues."""

    __slots__ = ("_from_lists", "_parsed", "_references", "identity", "store")

    def __init__(self, store: Store, identity: names.LocalIdentity) -> None:
        self.store = store
        self.identity = identity
        self._parsed: dict[str, names.FormatName] = {}
        self._references: dict[str, names.QueueAddress] = {}
        # Texts of elements that came from a list (while resolving one send).
        self._from_lists: set[str] = set()

    def parse(self, text: str) -> names.FormatName:
        """Parse a format name.

        Raises:
            InvalidName: it is not a valid format name.
        """
        parsed = self._parsed.get(text)
        if parsed is None:
            parsed = _kept(self._parsed, text, names.parse_format_name(text, self.identity))
        return parsed

    def queue(self, reference: str) -> QueueRecord:
        """Resolve a local queue reference (a name or a format name naming one
        queue here: what receives, peeks, purges, ... take) to its record.

        Raises:
            InvalidName, QueueNotFound
        """
        address = self._references.get(reference)
        if address is None:
            parsed = names.parse_queue_reference(reference, self.identity)
            address = _kept(self._references, reference, parsed)
        record = self.store.get_queue(address.queue)
        if record is None:
            msg = f"queue {quoted(reference)} does not exist"
            raise QueueNotFound(msg)
        return record

    def application_queue(self, reference: str, refusal: str) -> QueueRecord:
        """:meth:`queue`, for a request that only an application queue takes
        (its settings, its deletion): any other is refused with ``refusal``,
        said after its name.

        Raises:
            InvalidName, QueueNotFound; AccessDenied: a journal, system or subqueue.
        """
        record = self.queue(reference)
        if record.kind is not QueueKind.NORMAL:
            msg = f"{quoted(record.display_name)} {refusal}"
            raise AccessDenied(msg)
        return record

    def destinations(self, text: str) -> tuple[Target, ...]:
        """Where a send to the format name ``text`` puts a copy, in order.

        Raises:
            InvalidName, QueueNotFound, AccessDenied (a journal or dead-letter queue),
            InvalidArgument (too many queues, or none: lists without targets).
        """
        format_name = self.parse(text)
        if len(format_name.elements) == 1:
            # The usual case, without building lists.
            element = format_name.elements[0]
            if (
                element.is_local
                and not element.is_system
                and not element.is_journal
                and not element.is_subqueue
            ):
                record = self.store.get_queue(element.queue)
                if record is not None:
                    return (record,)
        queues: list[Target] = []
        seen: set[tuple[object, ...]] = set()
        self._from_lists.clear()
        for element in self._expanded(format_name):
            identity = (element.protocol, element.host, element.port, element.queue)
            if identity in seen:
                continue  # duplicates collapse, lists expanded (MSMQ)
            seen.add(identity)
            if not element.is_local:
                queues.append(RemoteDestination.from_address(element))
                continue
            if element.is_subqueue:
                msg = (
                    f"{quoted(element.text)}: nothing can be sent to a subqueue; messages "
                    "only move between a queue and its subqueues (qmgr move, QueueManager.move)"
                )
                raise AccessDenied(msg)
            if element.text in self._from_lists:
                record = self.store.get_queue(element.queue)
                queues.append(MissingTarget(element.text) if record is None else record)
                continue
            if element.is_system or element.is_journal:
                msg = (
                    f"{quoted(element.text)}: applications cannot send to journal or "
                    "dead-letter queues"
                )
                raise AccessDenied(msg)
            record = self.store.get_queue(element.queue)
            if record is None:
                msg = f"queue {quoted(element.text)} does not exist"
                raise QueueNotFound(msg)
            queues.append(record)
        self._from_lists.clear()
        if not queues:
            # Only lists without targets: a send that would write nothing.
            msg = f"{quoted(text)} reaches no queue: its distribution lists have no targets"
            raise InvalidArgument(msg)
        return tuple(queues)

    def fans_out(self, text: str) -> bool:
        """True if ``text`` names several destinations or a distribution list:
        a send to it follows seed 000's rule for a mixture of targets."""
        format_name = self.parse(text)
        return format_name.is_multiple or format_name.elements[0].distribution_list

    def _expanded(self, format_name: names.FormatName) -> list[names.QueueAddress]:
        """The elements of a format name with each ``DL=name`` replaced by its targets.

        Raises:
            QueueNotFound: a list does not exist; InvalidName: a target no longer parses.
        """
        found: list[names.QueueAddress] = []
        for element in format_name.elements:
            if not element.distribution_list:
                found.append(element)
                continue
            stored = self.store.get_list(element.queue)
            if stored is None:
                msg = f"distribution list {quoted(element.text)} does not exist"
                raise QueueNotFound(msg)
            for target in stored.targets:
                [address] = self.parse(target).elements
                self._from_lists.add(address.text)
                found.append(address)
        if len(found) > MAX_DESTINATIONS:
            msg = f"a send reaches at most {MAX_DESTINATIONS} queues, not {len(found)}"
            raise InvalidArgument(msg)
        return found
