"""Whether a client's request may run: queue permissions applied to the requests.

Theory of operation
-------------------
The rules are in ``qmgr.core.permissions``; this module applies them to the
client protocol, before a request's handler runs: the session asks
:meth:`Authorization.denial` for every request once the connection is
admitted, with the need the request table declares next to the request's
handler (``needs``, ``registry``), so that no handler can forget a check and
no request runs without a declared need:

* a request about one queue needs a right on it (:class:`~.needs.QueueRight`):
  receive, peek (a peek, a range, a measure), purge, delete, set properties
  (poison settings), get properties to read the permissions, change
  permissions to change them;
* a send needs send on every local queue it puts a copy in, its
  distribution lists expanded (a remote queue's own queue manager decides),
  and on a local queue it names as its admin or response queue (this queue
  manager writes acknowledgments there on the sender's behalf);
* a move (:class:`~.needs.MoveRights`) needs receive on its source and send
  on its target, unless the target is of the source's own family (a queue
  and its subqueues: one list). A move of dead letters back to their queues
  names no target when it is asked: the handler asks again, with
  :meth:`Authorization.move_targets`, for each queue a message would go to,
  so that every queue a principal's move puts a message in is checked here,
  as every queue its send reaches is;
* a prepared transaction is its preparer's: resolving it needs to be that
  principal (or an administrator), and listing shows a principal its own
  (:meth:`Authorization.owner_filter`);
* what concerns the whole queue manager needs an administrator
  (``auth.admins``): controlling outgoing queues, changing distribution lists;
* the metrics (the HTTP listener's ``/metrics``) need a monitoring principal
  (``auth.monitors``, its names or groups) or an administrator;
* the rest is open to every authenticated client: creating queues (the
  creator gets full control), listing queues and status, and tracing, which
  reports only on the queues the principal may peek
  (:meth:`Authorization.traceable`).

Peers are checked where their messages arrive (:meth:`Authorization.refuses_peer`;
a message of this queue manager's own that comes back over a session with itself,
:meth:`Authorization.refuses_unknown_client`)
and where acknowledgments of their messages are written
(:meth:`Authorization.refuses_acknowledgment`).

A journal queue and the subqueues of a queue use that queue's list; the
system queues (dead letters, the source journal) use the default list, so
only administrators read them unless a list says otherwise. A stored list
that cannot be read leaves its queue to administrators.

A denial is an ``AccessDenied`` that names the principal, the right and the
queue, and an ``access_denied`` log event with the principal bound.
Nothing is checked when ``auth.required`` is off. The callers count denials
and failed authentications in :attr:`Authorization.tally`, for the metrics.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final, assert_never

import storage
from qmgr.core import names
from qmgr.core.errors import AccessDenied, QueueManagerError, QueueNotFound
from qmgr.core.permissions import (
    ACL_SETTING_PREFIX,
    EVERYONE,
    Acl,
    Principal,
    Right,
    decode_acl,
    encode_acl,
    parse_rights,
    rights_names,
)
from qmgr.core.tokens import TokenBook
from qmgr.core.two_phase import MAX_RESOLVE
from storage import QueueKind, QueueRecord
from wire import MessageProperties, quoted

from .needs import (
    MOVE_RIGHTS,
    Administrators,
    Monitors,
    MoveRights,
    Need,
    Open,
    Preparer,
    QueueRight,
    SendRights,
)

__all__ = ["AccessTally", "Authorization"]

#: Lists kept in memory at most (the cache starts over past it).
_MAX_CACHED: Final = 100_000
#: The list of a queue whose stored list cannot be read: administrators only
#: (a damaged list must not open a queue to everyone).
_UNREADABLE: Final = Acl({})
#: A sender known only to be in ``everyone`` (no client may be named so).
_NOBODY: Final = Principal(EVERYONE)


@dataclass(slots=True)
class AccessTally:
    """Refusals since the start, counted where they are logged (for the metrics)."""

    #: Requests refused for want of a right (``access_denied``).
    denied: int = 0
    #: Tokens and client certificates refused (``authentication_failed``,
    #: ``client_tls_refused``).
    authentication_failures: int = 0


class Authorization:
    """Applies queue permissions to requests (see the module docstring)."""

    def __init__(
        self,
        core: Any,
        *,
        enabled: bool,
        admins: frozenset[str],
        groups: Mapping[str, frozenset[str]],
        default_acl: Mapping[str, list[str]],
        tokens: TokenBook | None = None,
        monitors: frozenset[str] = frozenset(),
    ) -> None:
        self._core = core
        self._tokens = tokens if tokens is not None else TokenBook({})
        self.enabled = enabled
        self._admins = admins
        self._monitors = monitors
        #: Denials and failed authentications since the start.
        self.tally = AccessTally()
        self._groups = groups
        self.default_acl = Acl({entry: parse_rights(words) for entry, words in default_acl.items()})
        #: Lists read from the store, by queue name. Every change goes through this
        #: object (one daemon owns the store), which keeps the cache in step.
        self._lists: dict[str, Acl] = {}
        #: Answers for sends, by (principal, destination, admin and response
        #: queue): a send is checked once per destination text, not per message,
        #: until a list changes or a queue is deleted. The whole principal is the
        #: key, its groups too: a local user of the Unix socket and a client
        #: authenticated under the same name are in different groups.
        self._sends: dict[tuple[Principal, str, str, str], str | None] = {}
        #: The identities that speak for a queue manager GUID (the peering
        #: layer's registry; none without mutual TLS on the peer port).
        self.identities_of: Callable[[uuid.UUID], frozenset[str]] = lambda _guid: frozenset()

    # ------------------------------------------------------------------ principals

    def principal(self, name: str, groups: frozenset[str] = frozenset()) -> Principal:
        """The principal ``name`` in ``groups`` (``group:NAME``, from the system) and
        in the configured groups it is a member of."""
        configured = frozenset(
            f"group:{group}" for group, members in self._groups.items() if name in members
        )
        return Principal(name, groups | configured)

    def authenticate(self, token: str) -> str | None:
        """The principal a token belongs to, or None (see ``core.tokens``)."""
        return self._tokens.principal_of(token)

    def is_admin(self, principal: Principal) -> bool:
        """True if ``principal`` (or a group it is in) is in ``auth.admins``."""
        return bool(principal.names() & self._admins)

    # ------------------------------------------------------------------ lists

    def governing(self, record: QueueRecord) -> QueueRecord:
        """The queue whose list governs ``record`` (its queue, for a journal or subqueue)."""
        if record.kind in (QueueKind.JOURNAL, QueueKind.SUBQUEUE) and record.parent_id is not None:
            parent = self._core.store.get_queue_by_id(record.parent_id)
            return parent if parent is not None else record
        return record

    def acl_of(self, record: QueueRecord) -> Acl:
        """The list that governs ``record`` (its queue's, for a journal or subqueue)."""
        governing = self.governing(record)
        cached = self._lists.get(governing.name)
        if cached is not None:
            return cached
        text = self._core.store.get_setting(ACL_SETTING_PREFIX + governing.name)
        acl = self.default_acl
        if text is not None:
            try:
                acl = decode_acl(text)
            except ValueError:
                acl = _UNREADABLE
        if len(self._lists) >= _MAX_CACHED:
            self._lists.clear()
        self._lists[governing.name] = acl
        return acl

    def written(self, setting: storage.SetSetting) -> None:
        """A list was written (a new queue's, or a change): the cache follows."""
        name = setting.key[len(ACL_SETTING_PREFIX) :]
        self._lists[name] = decode_acl(setting.value)
        self._sends.clear()

    def deleted(self, record: QueueRecord) -> None:
        """``record`` was deleted: its list goes from the cache, and so do the
        answers for sends, some of which rested on it (an admin queue must exist
        when a message names it)."""
        self._lists.pop(record.name, None)
        self._sends.clear()

    def new_queue_acl(self, name: str, creator: Principal | None) -> storage.SetSetting:
        """The operation that gives a new queue ``name`` (canonical) its list:
        the default, plus full control for its creator."""
        acl = self.default_acl
        if creator is not None:
            acl = acl.granted(creator.name, Right.FULL)
        return storage.SetSetting(ACL_SETTING_PREFIX + name, encode_acl(acl))

    def changed_acl(
        self, record: QueueRecord, entry: str, grant: Right, revoke: Right
    ) -> tuple[Acl, storage.SetSetting]:
        """The list of ``record`` after granting and revoking, and its write."""
        acl = self.acl_of(record).revoked(entry, revoke).granted(entry, grant)
        if not acl.entries.get(entry):
            acl = acl.revoked(entry, Right.FULL)
        return acl, storage.SetSetting(ACL_SETTING_PREFIX + record.name, encode_acl(acl))

    # ------------------------------------------------------------------ checks

    def denial(self, principal: Principal | None, request: Any, need: Need) -> str | None:
        """Why ``principal`` may not make ``request``, which ``need`` authorizes
        (its entry in the request table), or None if it may."""
        if not self.enabled or principal is None or self.is_admin(principal):
            return None
        match need:
            case Open():
                return None
            case QueueRight():
                name, right = need.of(request)
                return self._queue_denial(principal, name, right)
            case SendRights():
                return self._send_denial_kept(principal, request.message)
            case MoveRights():
                return self._move_denial(principal, request.source, request.target)
            case Preparer():
                return self._resolve_denial(principal, request.xids)
            case Administrators():
                return f"{quoted(principal.name)} is not an administrator (auth.admins)"
            case Monitors():
                if principal.names() & self._monitors:
                    return None
                return (
                    f"{quoted(principal.name)} may not read the metrics: it is neither in "
                    "auth.monitors nor an administrator (auth.admins)"
                )
            case _:
                assert_never(need)

    def move_targets(
        self, principal: Principal | None, request: Any
    ) -> Callable[[QueueRecord], str | None] | None:
        """For a move (``MoveMessages``) that names no target: why ``principal``
        may not move a message into a queue, asked of :meth:`denial` with that
        queue as the request's target; None: every queue (an administrator, or
        no permissions)."""
        if not self.enabled or principal is None or self.is_admin(principal):
            return None

        def denied(target: QueueRecord) -> str | None:
            moving = dataclasses.replace(request, target=target.name)
            return self.denial(principal, moving, MOVE_RIGHTS)

        return denied

    def owner_filter(self, principal: Principal | None) -> str | None:
        """Whose in-doubt transactions ``principal`` may list: its own (its
        name), or None for every one (an administrator, or no permissions)."""
        if not self.enabled or principal is None or self.is_admin(principal):
            return None
        return principal.name

    def traceable(self, principal: Principal | None) -> Callable[[QueueRecord], bool] | None:
        """Which queues a trace by ``principal`` reports on: those it may peek
        (outgoing queues, and what belongs to the whole queue manager, only to
        administrators); None: everything (an administrator, or no permissions)."""
        if not self.enabled or principal is None or self.is_admin(principal):
            return None

        def visible(record: QueueRecord) -> bool:
            if record.kind is QueueKind.OUTGOING:
                return False
            return self.acl_of(record).allows(principal, Right.PEEK)

        return visible

    def refuses_peer(self, identity: str | None) -> Callable[[QueueRecord], bool]:
        """The test an arriving message from peer ``identity`` passes: True when a
        queue's list does not give ``peer:<identity>`` (``peer:anonymous``
        without mutual TLS) the right to send."""
        peer = self.principal(f"peer:{identity or 'anonymous'}")

        def refuses(record: QueueRecord) -> bool:
            return not (self.is_admin(peer) or self.acl_of(record).allows(peer, Right.SEND))

        return refuses

    def refuses_unknown_client(self) -> Callable[[QueueRecord], bool]:
        """The test a message sent by one of this queue manager's own clients passes
        when it comes back over a session with itself (a name of this queue manager
        it does not know as its own: a port map, a NAT, a DNS name not in
        ``server.aliases``). The client that sent it is not known there, so it may
        put there only what ``everyone`` may: True when a queue's list does not
        give ``everyone`` the right to send. (Judged as this queue manager's peer,
        any client could reach, by such a name, the queues open to its peers.)"""

        def refuses(record: QueueRecord) -> bool:
            return not self.acl_of(record).allows(_NOBODY, Right.SEND)

        return refuses

    def _one_queue(self, destination: str) -> bool:
        """True if ``destination`` names one queue (no list, no several elements)."""
        try:
            parsed = self._core.addressing.parse(destination)
        except QueueManagerError:
            return False
        return not parsed.is_multiple and not parsed.elements[0].distribution_list

    def _resolve_denial(self, principal: Principal, xids: tuple[str, ...]) -> str | None:
        """Why ``principal`` may not resolve ``xids``: one was prepared (or, with
        its outcome kept, begun) by another principal, or by none known."""
        store = self._core.store
        for xid in xids[:MAX_RESOLVE]:
            try:
                prepared = store.prepared(xid)
                outcome = None if prepared is not None else store.outcome(xid)
            except storage.StoreError as exc:
                return f"transaction {quoted(xid)} cannot be read: {exc}"
            found = prepared if prepared is not None else outcome
            if found is not None and found.owner != principal.name:
                return (
                    f"{quoted(principal.name)} may not resolve transaction {quoted(xid)}: only the "
                    "principal that prepared it and administrators may"
                )
        return None

    def _queue_denial(self, principal: Principal, reference: str, needed: Right) -> str | None:
        try:
            record = self._core.queue(reference)
        except QueueManagerError:
            return None  # the handler reports the unknown queue or bad name
        if self.acl_of(record).allows(principal, needed):
            return None
        return _denied(principal, needed, record)

    def _move_denial(self, principal: Principal, source: str, target: str) -> str | None:
        """Why ``principal`` may not move messages from ``source`` to ``target``:
        receive on the source, and send on a target governed by another list."""
        why = self._queue_denial(principal, source, Right.RECEIVE)
        if why is not None or not target:
            return why
        try:
            a, b = self._core.queue(source), self._core.queue(target)
        except QueueManagerError:
            return None  # the handler reports the unknown queue or bad name
        if self.governing(a).queue_id == self.governing(b).queue_id:
            return None  # one family, one list: receive there is enough
        if self.acl_of(b).allows(principal, Right.SEND):
            return None
        return f"{_denied(principal, Right.SEND, b)}, where the move would put the messages"

    def _send_denial_kept(self, principal: Principal, message: Any) -> str | None:
        """:meth:`_send_denial`, kept per (principal, destination, admin and response
        queue) while no list changes, for a destination that names one queue."""
        key = (principal, message.destination, message.admin_queue, message.response_queue)
        if key in self._sends:
            return self._sends[key]
        answer = self._send_denial(principal, message)
        if self._one_queue(key[1]):  # a list's targets may change: not kept
            if len(self._sends) >= _MAX_CACHED:
                self._sends.clear()
            self._sends[key] = answer
        return answer

    def _send_denial(self, principal: Principal, message: Any) -> str | None:
        """Why ``principal`` may not send ``message``: a local queue it puts a copy
        in, or names as its admin or response queue, does not give it send."""
        addressing = self._core.addressing
        try:
            targets = addressing.destinations(message.destination)
        except QueueManagerError:
            return None  # the send fails with that error
        for target in targets:
            if isinstance(target, QueueRecord) and not self.acl_of(target).allows(
                principal, Right.SEND
            ):
                return _denied(principal, Right.SEND, target)
        # Acknowledgments are written into the admin queue by this queue manager
        # on the sender's behalf, and a response queue is where the sender asks
        # for replies: naming one needs the right to send to it.
        for role, reference in (
            ("admin", message.admin_queue),
            ("response", message.response_queue),
        ):
            if not reference or not self._one_queue(reference):
                continue  # (the send fails: one queue is named, not several)
            try:
                named = addressing.destinations(reference)
            except QueueNotFound:
                if role == "admin":
                    # Nothing to check now, and whoever creates the queue later
                    # would get this sender's acknowledgments: refused.
                    return (
                        f"the admin queue {quoted(reference)} does not exist: a local admin queue "
                        "must exist when a message names it, since the right to send there "
                        "is checked then"
                    )
                continue  # the queue manager never writes a response queue itself
            except AccessDenied as exc:
                # A journal, dead-letter or subqueue: nobody may send there, so
                # nobody may name one as where replies or acknowledgments go.
                return f"{exc.message}, named as the {role} queue"
            except QueueManagerError:
                continue  # the send fails with that error
            for target in named:
                if isinstance(target, QueueRecord) and not self.acl_of(target).allows(
                    principal, Right.SEND
                ):
                    return f"{_denied(principal, Right.SEND, target)}, named as the {role} queue"
        return None

    def refuses_acknowledgment(self, message: MessageProperties, record: QueueRecord) -> bool:
        """True if an acknowledgment of ``message``, from another queue manager,
        may not be written into ``record``, its admin queue here.

        As MSMQ, which writes its acknowledgments with the rights of the
        queue manager that sends them, an acknowledgment is a message from the
        message's source queue manager: ``peer:<identity>`` for each identity
        that speaks for its GUID, ``peer:anonymous`` when none does. A
        message sent here by a local client was checked when it was sent.
        """
        if not self.enabled:
            return False
        identities = self.identities_of(message.source_qm) or frozenset({"anonymous"})
        acl = self.acl_of(record)
        for identity in identities:
            peer = self.principal(f"peer:{identity}")
            if self.is_admin(peer) or acl.allows(peer, Right.SEND):
                return False
        return True


def _denied(principal: Principal, needed: Right, record: QueueRecord) -> str:
    right = "/".join(rights_names(needed))
    queue = names.display_format_name(record.name)
    return (
        f"{quoted(principal.name)} may not {right} on queue {quoted(record.display_name)} ({queue})"
    )
