"""Queue permissions: who may do what to a queue (MSMQ's queue access rights).

Theory of operation
-------------------
A *principal* is who a connection authenticated as: a user (a client
certificate's common name, a token's name, or the local user of the Unix
socket), with the groups it belongs to, or a peer queue manager
(``peer:<identity>``, its certificate's common name). Every principal is
also in the group ``everyone``.

Each queue has an access control list: entries ``principal -> rights``,
where an entry names a user, a group (``group:<name>``), a peer
(``peer:<identity>``, ``peer:*`` for every peer) or ``everyone``. The
rights are MSMQ's (:class:`Right`): send, receive (which includes peek),
peek, purge, delete, set properties, get properties, change permissions,
and full control. A principal holds the union of the rights of every entry
that names it or a group it is in; there are no deny entries.

A queue gets its list when it is created: the configured default
(``auth.default_acl``, by default send and get properties for everyone)
plus full control for its creator. The list is stored with the queue (a
store setting written in the queue's creation unit) and changed by
``qmgr queue grant|revoke``, which needs change-permissions (part of full
control). Administrators (``auth.admins``: principals or groups) hold every
right on every queue and may do what concerns the whole queue manager
(in-doubt transactions, outgoing queues, distribution lists).

Permissions are checked only when clients must authenticate
(``auth.required``): without it there is no principal to check, and every
client may do everything, as before.

Like the rest of the core: no I/O; the store is read, never written.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final

from wire import quoted
from wire.rights import Right, parse_rights, rights_names

__all__ = [
    "ACL_SETTING_PREFIX",
    "EVERYONE",
    "Acl",
    "Principal",
    "Right",
    "acl_entry",
    "decode_acl",
    "encode_acl",
    "parse_rights",
    "rights_names",
    "user_name_problem",
]

#: Store setting of a queue's list: ``acl:<queue key>``.
ACL_SETTING_PREFIX: Final = "acl:"
#: The prefixes of a group's and a peer's entries.
_PREFIXES: Final = ("group:", "peer:")
#: Longest list entry, in characters.
MAX_ENTRY: Final = 256
#: The group every principal is in.
EVERYONE: Final = "everyone"


@dataclass(frozen=True, slots=True)
class Principal:
    """Who a connection is: a name and the groups (``group:<name>``) it is in."""

    name: str
    groups: frozenset[str] = field(default_factory=frozenset)

    def names(self) -> frozenset[str]:
        """Every list entry that may apply to it."""
        own = {self.name, EVERYONE, *self.groups}
        if self.name.startswith("peer:"):
            own.add("peer:*")
        return frozenset(own)


@dataclass(frozen=True, slots=True)
class Acl:
    """A queue's access control list: entry name -> rights."""

    entries: Mapping[str, Right]

    def rights_of(self, principal: Principal) -> Right:
        """The union of the rights of every entry that names ``principal``."""
        rights = Right.NONE
        for name in principal.names():
            rights |= self.entries.get(name, Right.NONE)
        return rights

    def allows(self, principal: Principal, needed: Right) -> bool:
        """True if ``principal`` holds every right in ``needed``."""
        return self.rights_of(principal) & needed == needed

    def granted(self, entry: str, rights: Right) -> Acl:
        """The list with ``rights`` added to ``entry``."""
        entries = dict(self.entries)
        entries[entry] = entries.get(entry, Right.NONE) | rights
        return Acl(entries)

    def revoked(self, entry: str, rights: Right) -> Acl:
        """The list with ``rights`` taken from ``entry`` (the entry goes when it holds none)."""
        entries = dict(self.entries)
        left = entries.get(entry, Right.NONE) & ~rights
        if left:
            entries[entry] = Right(left)
        else:
            entries.pop(entry, None)
        return Acl(entries)


def user_name_problem(name: str) -> str | None:
    """Why ``name`` cannot be a client's principal, or None: a client (a
    certificate's common name, a token's name) must not pass for a group, a
    peer or everyone, whose list entries it would then match."""
    if not name or any(ord(ch) < 0x20 or ord(ch) == 0x7F for ch in name):
        return f"{quoted(name)} is empty or has control characters"
    if name.casefold() == EVERYONE or _prefix(name) is not None:
        return f"{quoted(name)} names a group, a peer or everyone, not a client"
    return None


def acl_entry(text: str) -> str:
    """The list entry ``text`` names, spelled as entries are matched:
    ``everyone`` and the prefixes ``group:`` and ``peer:`` in lower case,
    whatever case they were typed in (``Everyone`` is MSMQ's spelling), and
    no white space around it.

    Raises:
        ValueError: empty, too long, with control characters, or a prefix
            without a name.
    """
    entry = text.strip()
    if (
        not entry
        or len(entry) > MAX_ENTRY
        or any(ord(ch) < 0x20 or ord(ch) == 0x7F for ch in entry)
    ):
        msg = f"an entry is a principal, group:NAME, peer:NAME or everyone, not {quoted(text)}"
        raise ValueError(msg)
    if entry.casefold() == EVERYONE:
        return EVERYONE
    prefix = _prefix(entry)
    if prefix is None:
        return entry
    if len(entry) == len(prefix):
        msg = f"{quoted(text)} names no {prefix[:-1]}: write {prefix}NAME"
        raise ValueError(msg)
    return prefix + entry[len(prefix) :]


def _prefix(entry: str) -> str | None:
    """``group:`` or ``peer:`` if ``entry`` begins with it, in any case."""
    for prefix in _PREFIXES:
        if entry[: len(prefix)].lower() == prefix:
            return prefix
    return None


def encode_acl(acl: Acl) -> str:
    """The stored form: JSON, entry -> rights as an integer."""
    return json.dumps({name: int(rights) for name, rights in sorted(acl.entries.items())})


def decode_acl(text: str) -> Acl:
    """The list of a stored setting.

    Raises:
        ValueError: it is not one.
    """
    raw = json.loads(text)
    if not isinstance(raw, dict):
        msg = "a stored access list is not a JSON object"
        raise ValueError(msg)  # noqa: TRY004 - a stored value, not an argument
    return Acl({str(name): Right(int(value) & Right.FULL) for name, value in raw.items()})
