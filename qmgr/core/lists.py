"""Distribution lists: named sets of destinations, usable wherever a destination is.

Theory of operation
-------------------
A list is kept in the store (``storage.ops.lists``) under its canonical name,
validated like a queue name, with up to :data:`MAX_LIST_TARGETS` targets:
format names of single queues, here or on other queue managers, checked
when they are added (no journal or system queue, no subqueue, no list inside a
list, and a queue here must exist: naming one that does not is QueueNotFound,
as a send to it is).
A send names a list as ``DL=name``, alone or among the elements of a
multiple-element format name; ``Addressing`` expands it when the send is
prepared, so a change to a list applies to the sends prepared after it and
never to messages already sent. The expansion follows MSMQ ([MS-MQDMPR]
§3.1.7.3.8): lists are expanded, duplicates removed case-insensitively, one
copy per target, all in the sender's transaction (or unit).

A list whose target is a local queue deleted since it was added does not make
sends to it fail: that copy is kept in ``system$;deadletter`` (or
``system$;deadxact``) with NACK_BAD_DST_Q, as a queue manager would refuse it
at arrival. Seed 000's rule for a mixture of transactional and
non-transactional targets is in ``engine.prepare_send``: a copy that does not
suit its local queue is rejected there, into this queue manager's
dead-letter queue with the NACK class that says why.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final

from storage import CreateList, DeleteList, DistributionList, SetListTargets, Store, Unit
from wire import quoted

from . import names
from .errors import InvalidArgument, InvalidName, QueueNotFound

__all__ = ["MAX_LIST_TARGETS", "ListAdmin", "list_key"]

#: Most targets one list holds.
MAX_LIST_TARGETS: Final = 1000


def list_key(name: str) -> str:
    """The canonical name of a list given as ``name`` or ``DL=name``.

    Raises:
        InvalidName: not a valid list name.
    """
    return names.validate_queue_name(_list_name(name), names.LIST_NAME)


def _list_name(name: str) -> str:
    """``name`` as given, without a ``DL=`` before it."""
    text = name.strip()
    if text.upper().startswith(names.DL_PREFIX):
        text = text[len(names.DL_PREFIX) :].strip()
    return text


class ListAdmin:
    """Creates, changes and reads distribution lists (the caller writes the units)."""

    __slots__ = ("_identity", "_store")

    def __init__(self, store: Store, identity: names.LocalIdentity) -> None:
        self._store = store
        self._identity = identity

    def get(self, name: str) -> DistributionList:
        """The list ``name``.

        Raises:
            InvalidName, QueueNotFound
        """
        key = list_key(name)
        found = self._store.get_list(key)
        if found is None:
            msg = f"distribution list {quoted(name)} does not exist"
            raise QueueNotFound(msg)
        return found

    def all(self) -> list[DistributionList]:
        """Every list, by name."""
        return self._store.lists()

    def create(self, name: str, targets: Iterable[str] = ()) -> Unit:
        """The unit that creates the list ``name``.

        Raises:
            InvalidName: a bad name or target; QueueNotFound: a target names a
            queue here that does not exist; InvalidArgument: too many targets.
        """
        key = list_key(name)
        checked = self._merge((), targets)
        return Unit((CreateList(DistributionList(key, _list_name(name), checked)),))

    def change(self, name: str, *, add: Iterable[str] = (), remove: Iterable[str] = ()) -> Unit:
        """The unit that adds and removes targets (removing one it lacks is no error).

        Raises:
            InvalidName, InvalidArgument; QueueNotFound: the list does not exist,
            or a target added names a queue here that does not exist.
        """
        current = self.get(name)
        gone = {self._identity_of(target) for target in remove}
        kept = tuple(t for t in current.targets if self._identity_of(t) not in gone)
        return Unit((SetListTargets(current.name, self._merge(kept, add)),))

    def delete(self, name: str) -> Unit:
        """The unit that deletes the list ``name``.

        Raises:
            InvalidName
        """
        return Unit((DeleteList(list_key(name)),))

    def _merge(self, kept: tuple[str, ...], added: Iterable[str]) -> tuple[str, ...]:
        targets = list(kept)
        seen = {self._identity_of(target) for target in kept}
        for target in added:
            text = target.strip()
            identity = self._check(text, exists=True)
            if identity not in seen:
                seen.add(identity)
                targets.append(text)
        if len(targets) > MAX_LIST_TARGETS:
            msg = f"a distribution list holds at most {MAX_LIST_TARGETS} targets"
            raise InvalidArgument(msg)
        return tuple(targets)

    def _check(self, text: str, *, exists: bool = False) -> tuple[object, ...]:
        """The identity of the target ``text`` (protocol, host, port, queue).

        Raises:
            InvalidName: it is not a target a list can hold; QueueNotFound:
                with ``exists``, it names a queue here that does not exist.
        """
        element = names.parse_one_queue(
            text,
            self._identity,
            several=": a list's target is one queue, not a multiple-element name",
            listed=": a distribution list cannot contain another list",
        )
        if element.is_system or element.is_journal or element.is_subqueue:
            msg = f"{quoted(text)}: journal and dead-letter queues and subqueues take no sends"
            raise InvalidName(msg)
        if exists and element.is_local and self._store.get_queue(element.queue) is None:
            msg = f"queue {quoted(text)} does not exist"
            raise QueueNotFound(msg)
        return (element.protocol, element.host, element.port, element.queue)

    def _identity_of(self, text: str) -> tuple[object, ...]:
        try:
            return self._check(text.strip())
        except (InvalidName, ValueError):
            return (text.strip().lower(),)
