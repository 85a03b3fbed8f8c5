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
subqueues take no sends. A send to a remote queue cannot be checked against that queue
(as in MSMQ): whether it exists, and is transactional, is judged where it
arrives.

It reads the store's catalog and never writes it; errors are the core's own.
"""

from __future__ import annotations

from typing import Final

from storage import QueueRecord, Store

from . import names
from .errors import AccessDenied, QueueNotFound
from .outgoing import RemoteDestination

__all__ = ["FORMAT_NAME_CACHE_SIZE", "Addressing", "Target"]

#: Where one copy of a send goes.
Target = QueueRecord | RemoteDestination

#: Parsed format names remembered; the cache starts afresh when full.
FORMAT_NAME_CACHE_SIZE: Final = 4096


class Addressing:
    """Parses format names and resolves destinations against ``store``'s queues."""

    __slots__ = ("_parsed", "identity", "store")

    def __init__(self, store: Store, identity: names.LocalIdentity) -> None:
        self.store = store
        self.identity = identity
        self._parsed: dict[str, names.FormatName] = {}

    def parse(self, text: str) -> names.FormatName:
        """Parse a format name.

        Raises:
            InvalidName: it is not a valid format name.
        """
        parsed = self._parsed.get(text)
        if parsed is None:
            parsed = names.parse_format_name(text, self.identity)
            if len(self._parsed) >= FORMAT_NAME_CACHE_SIZE:
                self._parsed.clear()
            self._parsed[text] = parsed
        return parsed

    def destinations(self, text: str) -> tuple[Target, ...]:
        """Where a send to the format name ``text`` puts a copy, in order.

        Raises:
            InvalidName, QueueNotFound, AccessDenied (a journal or dead-letter queue).
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
        for element in format_name.elements:
            if not element.is_local:
                queues.append(RemoteDestination.from_address(element))
                continue
            if element.is_subqueue:
                msg = (
                    f"{element.text!r}: nothing can be sent to a subqueue; messages only move "
                    "between a queue and its subqueues (qmgr move, QueueManager.move)"
                )
                raise AccessDenied(msg)
            if element.is_system or element.is_journal:
                msg = f"{element.text!r}: applications cannot send to journal or dead-letter queues"
                raise AccessDenied(msg)
            record = self.store.get_queue(element.queue)
            if record is None:
                msg = f"queue {element.text!r} does not exist"
                raise QueueNotFound(msg)
            queues.append(record)
        return tuple(queues)
