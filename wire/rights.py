"""Queue access rights: the bits of a queue's access control list, and their words.

MSMQ's queue rights (the ``MQSEC_*`` names in the comments), as qmgr's
client protocol carries them (a u16 in ``ChangePermissions`` and
``Permissions``) and as the CLI and the configuration spell them. Pure: the
core's permission model and the SDK both use this one definition.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from typing import Final

__all__ = ["Right", "parse_rights", "rights_names"]


class Right(enum.IntFlag):
    """A queue access right (MSMQ's MQSEC_* names in the comments)."""

    NONE = 0
    SEND = 0x01  #: MQSEC_WRITE_MESSAGE
    PEEK = 0x02  #: MQSEC_PEEK_MESSAGE
    RECEIVE = 0x04 | PEEK  #: MQSEC_RECEIVE_MESSAGE (receiving includes peeking)
    PURGE = 0x08  #: MQSEC_DELETE_MESSAGE (every message at once: a purge)
    DELETE = 0x10  #: MQSEC_DELETE_QUEUE
    SET_PROPERTIES = 0x20  #: MQSEC_SET_QUEUE_PROPERTIES (poison settings, quota)
    GET_PROPERTIES = 0x40  #: MQSEC_GET_QUEUE_PROPERTIES (see the queue listed)
    CHANGE_PERMISSIONS = 0x80  #: MQSEC_CHANGE_QUEUE_PERMISSIONS (grant, revoke, see the list)
    FULL = 0xFF  #: MQSEC_QUEUE_GENERIC_ALL


#: The words of the CLI and the configuration, in the order they are shown.
_NAMES: Final = {
    "send": Right.SEND,
    "receive": Right.RECEIVE,
    "peek": Right.PEEK,
    "purge": Right.PURGE,
    "delete": Right.DELETE,
    "set-properties": Right.SET_PROPERTIES,
    "get-properties": Right.GET_PROPERTIES,
    "change-permissions": Right.CHANGE_PERMISSIONS,
    "full": Right.FULL,
}


def parse_rights(words: Iterable[str]) -> Right:
    """The rights named by ``words`` (``send``, ``receive``, ..., ``full``).

    Raises:
        ValueError: an unknown word (the message lists the known ones).
    """
    rights = Right.NONE
    for word in words:
        right = _NAMES.get(word.strip().lower().replace("_", "-"))
        if right is None:
            msg = f"unknown right {word!r}; rights are {', '.join(_NAMES)}"
            raise ValueError(msg)
        rights |= right
    return rights


def rights_names(rights: Right) -> list[str]:
    """The words for ``rights``: ``["full"]``, or each right held (receive
    stands for receive and peek)."""
    if rights & Right.FULL == Right.FULL:
        return ["full"]
    names = []
    for name, right in _NAMES.items():
        if right is Right.FULL or (right is Right.PEEK and rights & Right.RECEIVE == Right.RECEIVE):
            continue
        if rights & right == right:
            names.append(name)
    return names
