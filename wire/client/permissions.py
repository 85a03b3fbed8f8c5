"""The client protocol's frames of authentication and queue permissions.

A queue's access control list maps entries (a user, ``group:NAME``,
``peer:NAME``, ``everyone``) to rights, a bit set of MSMQ's queue access
rights (``wire.rights.Right``: 0x01 send, 0x02 peek, 0x06 receive,
0x08 purge, 0x10 delete, 0x20 set properties, 0x40 get properties, 0x80
change permissions; 0xFF full control). A client that has no certificate
authenticates with a token (``Authenticate``) right after the Hello. These
requests are answered only on a connection that negotiated
``SECURITY_VERSION`` (6) or later.

Layouts (little-endian; ``str`` is u16 length + UTF-8)::

    Authenticate       0x1E  token str (the reply is Ok, value 0)
    GetPermissions     0x1B  queue str
    ChangePermissions  0x1C  queue str, entry str, grant u16, revoke u16
    Permissions        0x8F  queue str, entries: u32 count, then (name str, rights u16)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Final

__all__ = [
    "SECURITY_REQUESTS",
    "AclEntry",
    "Authenticate",
    "ChangePermissions",
    "GetPermissions",
    "Permissions",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class Authenticate:
    """Authenticate the connection with ``token`` (``auth.tokens`` of the daemon).
    The reply is ``Ok``; a token not accepted is ``ACCESS_DENIED`` and the end of
    the connection."""

    token: str = field(repr=False)


@dataclass(frozen=True, slots=True, kw_only=True)
class GetPermissions:
    """Ask for the access control list of ``queue``. The reply is :class:`Permissions`."""

    queue: str


@dataclass(frozen=True, slots=True, kw_only=True)
class ChangePermissions:
    """Grant ``grant`` and revoke ``revoke`` (rights bits) for ``entry`` on ``queue``.
    The reply is :class:`Permissions`, the list as it is now."""

    queue: str
    entry: str
    grant: int = 0
    revoke: int = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class AclEntry:
    """One entry of a list: who, and the rights bits it holds."""

    name: str
    rights: int


@dataclass(frozen=True, slots=True, kw_only=True)
class Permissions:
    """A queue's access control list, by entry name."""

    queue: str
    entries: tuple[AclEntry, ...]


#: The requests a daemon answers only on a connection of ``SECURITY_VERSION`` or later.
SECURITY_REQUESTS: Final = frozenset({Authenticate, GetPermissions, ChangePermissions})
