"""Which queue manager each peer identity may speak for.

Theory of operation
-------------------
With mutual TLS on the peer port, a peer is known by the common name of its
certificate (its *identity*), and the deployment's CA vouches for it. What a
certificate cannot say is which queue manager GUID the peer is: the GUID is
what keys exactly-once streams (``IncomingSequences`` accepts a message by
its source GUID and sequence), so a peer that could claim another queue
manager's GUID could inject messages into that queue manager's streams or
acknowledge its messages.

So each identity speaks for exactly one GUID:

* ``tls.pinned`` names it in the configuration, for identities an operator
  wants to fix in advance;
* otherwise the first session the identity opens registers the GUID it
  announces (*trust on first use*). The registration is kept in the store
  as the setting ``peer-guid:<identity>`` and holds across restarts. The
  write goes to the committer in a task of its own, not awaited by the
  session (a crash before it only means the next session registers again);
  the registration counts in memory at once, so two sessions racing cannot
  register two GUIDs.

A session whose announced GUID is not its identity's is closed at once
(:meth:`PeerIdentities.opened` says why), and so is one that announces this
queue manager's own GUID: no identity may speak for it (a session that
reaches this queue manager itself, or an impostor). The reverse lookup,
:meth:`PeerIdentities.identities_of`, tells whose rights an acknowledgment
of another queue manager's message is written with (``authorization``).
On an open session, every packet must come from that GUID
(:meth:`PeerIdentities.may_carry`), except on the sessions of identities
listed in ``tls.relays``: routers, which carry messages and acknowledgments
of other queue managers.
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Final

import structlog
import trio

import storage

if TYPE_CHECKING:
    from ..committer import Committer

__all__ = ["SETTING_PREFIX", "PeerIdentities"]

#: Store setting key of an identity's registered GUID: ``peer-guid:<identity>``.
SETTING_PREFIX: Final = "peer-guid:"


class PeerIdentities:
    """The registry of peer identities and their GUIDs (see the module docstring)."""

    def __init__(
        self,
        store: storage.Store,
        *,
        pinned: dict[str, uuid.UUID],
        relays: frozenset[str],
        log: structlog.typing.FilteringBoundLogger,
    ) -> None:
        self._store = store
        self._pinned = dict(pinned)
        self._relays = relays
        self._log = log
        self._registered: dict[str, uuid.UUID] = {}
        #: The identities that speak for each GUID (pinned or registered).
        self._speakers: dict[uuid.UUID, set[str]] = {}
        for identity, guid in self._pinned.items():
            self._speakers.setdefault(guid, set()).add(identity)
        for key, text in store.settings(SETTING_PREFIX):
            try:
                self._learn(key[len(SETTING_PREFIX) :], uuid.UUID(text))
            except ValueError:
                continue
        self._nursery: trio.Nursery | None = None
        self._committer: Committer | None = None

    def attach(self, nursery: trio.Nursery, committer: Committer) -> None:
        """Write registrations with ``committer``, in tasks of ``nursery``."""
        self._nursery = nursery
        self._committer = committer

    def guid_of(self, identity: str) -> uuid.UUID | None:
        """The GUID ``identity`` speaks for, if it is pinned or registered."""
        known = self._pinned.get(identity) or self._registered.get(identity)
        if known is not None:
            return known
        text = self._store.get_setting(SETTING_PREFIX + identity)
        if text is None:
            return None
        try:
            known = uuid.UUID(text)
        except ValueError:
            return None
        self._learn(identity, known)
        return known

    def identities_of(self, guid: uuid.UUID) -> frozenset[str]:
        """The identities known to speak for queue manager ``guid`` (empty: none,
        as for every peer when the peer port has no TLS)."""
        return frozenset(self._speakers.get(guid, ()))

    def _learn(self, identity: str, guid: uuid.UUID) -> None:
        if identity not in self._pinned:
            self._registered[identity] = guid
        self._speakers.setdefault(guid, set()).add(identity)

    def opened(self, identity: str, guid: uuid.UUID) -> str | None:
        """A session of ``identity`` announced ``guid``: None if that is its GUID
        (registering it on first use), else why the session must close."""
        if guid == self._store.qm_guid:
            return (
                f"peer {identity!r} announced this queue manager's own GUID {{{guid}}}: "
                "a session that reaches this queue manager itself, or an impostor; "
                "refusing the session"
            )
        known = self.guid_of(identity)
        if known is None:
            self._learn(identity, guid)
            if self._nursery is not None:
                self._nursery.start_soon(self._record, identity, guid)
            return None
        if known == guid:
            return None
        how = "pinned in tls.pinned" if identity in self._pinned else "registered"
        return (
            f"peer {identity!r} announced queue manager {{{guid}}} but speaks for "
            f"{{{known}}} ({how}); refusing the session"
        )

    async def _record(self, identity: str, guid: uuid.UUID) -> None:
        assert self._committer is not None
        setting = storage.SetSetting(SETTING_PREFIX + identity, str(guid))
        try:
            outcome = await self._committer.submit(storage.Unit((setting,)))
        except Exception as exc:  # the store or the committer: registered again next time
            self._log.warning("peer_identity_not_recorded", identity=identity, reason=str(exc))
            return
        if outcome.error is None:
            self._log.info("peer_identity_registered", identity=identity, guid=str(guid))

    def is_relay(self, identity: str) -> bool:
        """True if ``identity`` may carry other queue managers' packets (a router)."""
        return identity in self._relays

    def may_carry(self, identity: str, session_guid: uuid.UUID, source: uuid.UUID) -> bool:
        """True if a packet from ``source`` may arrive on a session of ``identity``
        that announced ``session_guid``."""
        return source == session_guid or identity in self._relays
