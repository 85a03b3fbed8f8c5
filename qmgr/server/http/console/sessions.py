"""The console's sessions: who logged in, until when, and the token each form carries.

Theory of operation
-------------------
A person logs in to the console once, with a token (or a client
certificate, or nobody when ``auth.required`` is off), and then works with
the session cookie the login set. The cookie carries only a random session
id (:data:`ID_BYTES` bytes from ``secrets``); everything else stays here,
on the server, in :class:`ConsoleSessions`:

* **who**: the principal's name (None: nobody, with ``auth.required``
  off), from which each request makes the principal again, so that a
  change to the groups or the lists applies at once;
* **until when**: a session ends ``http.session_timeout`` seconds after its
  last request (idle), and ``http.session_lifetime`` seconds after the
  login whatever happens. An ended session is forgotten the first time it
  is asked for, and its cookie then leads back to the login form; logging
  out forgets it at once. The expiry is the server's: a cookie kept or
  copied past it opens nothing;
* **the CSRF token**: a second random value, put in every form the
  console renders and checked (in constant time) on every action. A page
  of another site cannot read it (the cookie is ``SameSite=Strict`` as
  well), so it cannot make the browser act.

At most :data:`MAX_SESSIONS` sessions are kept, and
:data:`MAX_SESSIONS_PER_PRINCIPAL` of one principal: a new one beyond either
ends the one idle the longest (of that principal, for the second), so a
principal that logs in again and again ends only its own sessions. Sessions
for nobody (``auth.required`` off) are every visitor's, one per browser, so
only the first bound applies to them: a script that opens the console
without a cookie ends the sessions of the people at work only after
:data:`MAX_SESSIONS` visits, each time the one idle the longest. A page
that refreshes itself does not keep its session alive: only requests of
someone at work do. Like the protocol classes, this is plain state
driven by an explicit ``now`` (trio's clock, in seconds): no I/O, no
logging.
"""

from __future__ import annotations

import hmac
import secrets
from dataclasses import dataclass, field
from typing import Final

__all__ = [
    "ID_BYTES",
    "MAX_NOTICES",
    "MAX_SESSIONS",
    "MAX_SESSIONS_PER_PRINCIPAL",
    "ConsoleSession",
    "ConsoleSessions",
]

#: Random bytes of a session id and of a CSRF token.
ID_BYTES: Final = 32
#: Sessions kept at most (the one idle the longest ends for a new one).
MAX_SESSIONS: Final = 10_000
#: Sessions of one principal at most (its own idle the longest ends for a new
#: one): a principal logging in again and again ends only its own sessions.
MAX_SESSIONS_PER_PRINCIPAL: Final = 32
#: Notices a session keeps for its next page.
MAX_NOTICES: Final = 10


@dataclass(slots=True, eq=False)
class ConsoleSession:
    """One logged-in browser (see the module docstring)."""

    #: The cookie's value.
    session_id: str
    #: Who logged in (None: nobody; ``auth.required`` is off).
    principal: str | None
    #: What each form of this session carries.
    csrf: str
    #: How the principal was known: ``token``, ``certificate`` or ``none``.
    method: str
    #: When it was opened and when it was last used (trio's clock).
    opened_at: float
    last_used: float
    #: What the next page says at its top (what the last action did).
    notices: list[str] = field(default_factory=list)

    def accepts(self, token: str | None) -> bool:
        """Whether ``token`` (an action's form field) is this session's CSRF token."""
        if not token:
            return False
        return hmac.compare_digest(token.encode(), self.csrf.encode())


class ConsoleSessions:
    """The open sessions, with their expiry (see the module docstring)."""

    def __init__(
        self,
        *,
        idle_timeout: float,
        lifetime: float,
        limit: int = MAX_SESSIONS,
        per_principal: int = MAX_SESSIONS_PER_PRINCIPAL,
    ) -> None:
        if idle_timeout <= 0 or lifetime <= 0 or limit < 1:
            msg = "a session needs a positive timeout, lifetime and limit"
            raise ValueError(msg)
        self.idle_timeout = idle_timeout
        self.lifetime = lifetime
        self.limit = limit
        self.per_principal = per_principal
        # Insertion order is use order: a session used again moves to the end.
        self._sessions: dict[str, ConsoleSession] = {}

    def __len__(self) -> int:
        return len(self._sessions)

    def open(self, principal: str | None, method: str, now: float) -> ConsoleSession:
        """A new session for ``principal``; at a limit (the principal's, or all
        sessions'), the one idle the longest ends."""
        if principal is not None:
            # Nobody's sessions (auth.required off) are every visitor's, told
            # apart by nothing: only the bound on all sessions applies to them.
            own = [sid for sid, s in self._sessions.items() if s.principal == principal]
            if len(own) >= self.per_principal:
                del self._sessions[own[0]]  # the principal's idle the longest
        while len(self._sessions) >= self.limit:
            del self._sessions[next(iter(self._sessions))]
        session = ConsoleSession(
            session_id=secrets.token_urlsafe(ID_BYTES),
            principal=principal,
            csrf=secrets.token_urlsafe(ID_BYTES),
            method=method,
            opened_at=now,
            last_used=now,
        )
        self._sessions[session.session_id] = session
        return session

    @staticmethod
    def guest(now: float) -> ConsoleSession:
        """A session that is not kept: the login form's, before anyone logged in."""
        return ConsoleSession(
            session_id="",
            principal=None,
            csrf="",
            method="login",
            opened_at=now,
            last_used=now,
        )

    def find(
        self, session_id: str | None, now: float, *, touch: bool = True
    ) -> ConsoleSession | None:
        """The live session of the cookie ``session_id``, marked used at ``now``
        (``touch``: a request of someone at work, not a page refreshing itself);
        None if there is none (never was, logged out, or ended: then forgotten)."""
        if not session_id:
            return None
        session = self._sessions.get(session_id)
        if session is None:
            return None
        if self.ended(session, now):
            del self._sessions[session_id]
            return None
        if not touch:
            return session
        session.last_used = now
        # Most recently used last (the eviction order).
        del self._sessions[session_id]
        self._sessions[session_id] = session
        return session

    def ended(self, session: ConsoleSession, now: float) -> bool:
        """Whether ``session`` has ended by ``now`` (idle too long, or too old)."""
        return (
            now - session.last_used >= self.idle_timeout or now - session.opened_at >= self.lifetime
        )

    def close(self, session_id: str) -> ConsoleSession | None:
        """End the session ``session_id`` (logging out); the one ended, if any."""
        return self._sessions.pop(session_id, None)

    def expire(self, now: float) -> int:
        """Forget every session ended by ``now``; how many."""
        ended = [sid for sid, s in self._sessions.items() if self.ended(s, now)]
        for session_id in ended:
            del self._sessions[session_id]
        return len(ended)
