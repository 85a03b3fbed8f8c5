"""The client protocol's frames for distribution lists (``qmgr dl``).

A distribution list is a named set of destinations kept by the queue
manager; a send names it as ``DL=name``. These requests are answered only on
a connection that negotiated ``OUTCOMES_VERSION`` or later (see
:mod:`wire.client.constants`).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True, kw_only=True)
class CreateList:
    """Create the distribution list ``name`` with ``targets`` (format names).
    The reply is ``Ok``."""

    name: str
    targets: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class ChangeList:
    """Add and remove targets of the list ``name``. The reply is ``Ok``."""

    name: str
    add: tuple[str, ...] = ()
    remove: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class DeleteList:
    """Delete the list ``name`` (messages already sent to it are not affected).
    The reply is ``Ok``."""

    name: str


@dataclass(frozen=True, slots=True, kw_only=True)
class GetLists:
    """Ask for the list ``name``, or every list when ``name`` is empty. The reply
    is :class:`ListInfoList`."""

    name: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class ListInfo:
    """A distribution list: its name and its targets, in the order added."""

    name: str
    targets: tuple[str, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class ListInfoList:
    """The answer to :class:`GetLists`."""

    lists: tuple[ListInfo, ...]
