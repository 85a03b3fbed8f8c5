"""Where a message goes: from the format name a sender wrote to the queues that take it.

Theory of operation
-------------------
A send names its destination with a format name (``orders``,
``DIRECT=OS:.\\private$\\orders``, or several of them separated by commas);
its admin and response queues are format names too. :class:`Addressing`
parses them (remembering the answers: senders repeat themselves) and
resolves a destination to the queue records that receive a copy. Every
element must be a local application queue: journal and dead-letter queues
take no sends, and a queue on another host is refused (delivery between
queue managers resolves those to outgoing queues here).

It reads the store's catalog and never writes it; errors are the core's own.
"""

from __future__ import annotations

from typing import Final

from storage import QueueRecord, Store

from . import names
from .errors import AccessDenied, NotSupported, QueueNotFound

__all__ = ["FORMAT_NAME_CACHE_SIZE", "Addressing"]

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

    def destinations(self, text: str) -> tuple[QueueRecord, ...]:
        """The queues a send to the format name ``text`` puts a copy on, in order.

        Raises:
            InvalidName, QueueNotFound, AccessDenied (a journal or dead-letter
            queue), NotSupported (a queue on another host).
        """
        format_name = self.parse(text)
        if len(format_name.elements) == 1:
            # The usual case, without building lists.
            element = format_name.elements[0]
            if element.is_local and not element.is_system and not element.is_journal:
                record = self.store.get_queue(element.queue)
                if record is not None:
                    return (record,)
        queues: list[QueueRecord] = []
        for element in format_name.elements:
            if not element.is_local:
                msg = (
                    f"{element.text!r} is a queue on another host; "
                    "this queue manager delivers only to its local queues"
                )
                raise NotSupported(msg)
            if element.is_system or element.is_journal:
                msg = f"{element.text!r}: applications cannot send to journal or dead-letter queues"
                raise AccessDenied(msg)
            record = self.store.get_queue(element.queue)
            if record is None:
                msg = f"queue {element.text!r} does not exist"
                raise QueueNotFound(msg)
            queues.append(record)
        return tuple(queues)
