"""The client port's accepting side: who may connect, and the TLS handshake.

Theory of operation
-------------------
Each connection the client listener accepts goes through, in order:

1. **Room** (:meth:`ClientPort._make_room`): at ``server.max_connections``,
   the oldest unauthenticated connection is closed to make room, else the
   connection idle the longest (no transaction, no waiting receive, silent
   for ``server.evictable_after``); if there is none, the newcomer is
   refused with an error frame saying so.
2. **Admission** (``qmgr.server.admission``, shared with the peer port):
   the per-address limit and the budgets of unauthenticated connections, in
   which a newcomer evicts the oldest.
3. **The failure delay** of its address, then **the TLS handshake**, both
   within the Hello deadline counted from the connection's arrival; a client
   certificate's common name becomes the principal, unless it names a group,
   a peer or everyone.
4. **The session** (``session``), which says when the client has
   authenticated; from then on it no longer counts as unauthenticated.

A connection on the Unix-domain socket is its local user from the start and
only needs room. Every refusal and eviction is one log event with the
reason (``connection_refused``, ``connection_evicted``, ``client_tls_refused``).
"""

from __future__ import annotations

import contextlib
import itertools
import ssl
from typing import Final

import structlog
import trio

from qmgr.config import Config
from qmgr.core.errors import LimitExceeded, QueueManagerError, ShuttingDown
from qmgr.core.permissions import user_name_problem
from qmgr.socket_stream import RawConnection
from qmgr.tcp import tune_tcp

from ..admission import Admission, AdmissionLimits, Arrival, Ticket
from ..tls import TlsFailed, common_name, start_tls
from .error_codes import error_frame
from .services import Services
from .session import ClientSession
from .unix_socket import local_user

__all__ = ["REFUSAL_TIMEOUT", "ClientPort"]

#: How long the error frame of a refused connection may take to write.
REFUSAL_TIMEOUT: Final = 1.0


class ClientPort:
    """Serves client connections: room, admission, handshakes and sessions."""

    def __init__(
        self,
        config: Config,
        services: Services,
        tls: ssl.SSLContext | None,
        log: structlog.typing.FilteringBoundLogger,
    ) -> None:
        self._config = config
        self._services = services
        self._tls = tls
        self._log = log
        #: The sessions being served, by connection id.
        self.sessions: dict[int, ClientSession] = {}
        #: Connections in their failure delay or TLS handshake (they count
        #: against server.max_connections).
        self.handshakes = 0
        self.admission = Admission(
            AdmissionLimits(
                max_connections_per_address=config.max_connections_per_address,
                failure_limit=config.auth_failure_limit,
                failure_delay=config.auth_failure_delay,
                max_unauthenticated_per_address=config.max_unauthenticated_per_address,
                max_unauthenticated=config.max_unauthenticated,
            )
        )
        self._conn_ids = itertools.count(1)
        services.authentication_failed = self.authentication_failed

    async def handle_connection(self, stream: trio.SocketStream) -> None:
        """Serve one client connection (the listener's handler)."""
        connection = RawConnection(stream)
        tune_tcp(connection)
        conn_id = next(self._conn_ids)
        peer = connection.peer_name()
        address = _address_of(peer)
        refusal = self._make_room()
        arrival = None
        if refusal is None:
            arrival = self.admission.arrive(address, trio.current_time())
            if isinstance(arrival, str):
                refusal = LimitExceeded(arrival)
        if refusal is not None or not isinstance(arrival, Arrival):
            reason = refusal.message if refusal is not None else "refused"
            self._log.warning("connection_refused", conn=conn_id, peer=peer, reason=reason)
            # Over TLS nothing can be said before the handshake: the refusal is the close.
            await _refuse(connection, None if self._tls else refusal)
            return
        for victim, why in arrival.evicted:
            victim.close(why)
        ticket = arrival.ticket
        served = False
        admitted = None
        try:
            with trio.CancelScope() as handshake_scope:
                ticket.close = lambda why: self._evicted(handshake_scope, conn_id, peer, why)
                admitted = await self._admit(connection, conn_id, peer, ticket)
            if admitted is None or handshake_scope.cancel_called:
                return
            client, principal = admitted
            session = ClientSession(
                self._services,
                client,
                conn_id=conn_id,
                peer=peer,
                principal=principal,
                on_authenticated=lambda: self.admission.authenticated(ticket),
                opened_at=ticket.opened_at,
            )
            ticket.close = session.close_soon
            served = True
            await self._serve(session)
        finally:
            self.admission.closed(ticket)
            if not served:
                with trio.CancelScope(shield=True):
                    await connection.aclose()

    def _evicted(self, scope: trio.CancelScope, conn_id: int, peer: str, why: str) -> None:
        """A connection still in its handshake is closed to make room."""
        self._log.info("connection_evicted", conn=conn_id, peer=peer, reason=why)
        scope.cancel()

    async def handle_local_connection(self, stream: trio.SocketStream) -> None:
        """Serve one client of the Unix-domain socket, known by its local user."""
        conn_id = next(self._conn_ids)
        try:
            user = local_user(stream.socket)
        except OSError as exc:
            self._log.warning("connection_refused", conn=conn_id, peer="unix", reason=str(exc))
            await stream.aclose()
            return
        connection = RawConnection(stream)
        peer = f"unix:{user.name}(pid {user.pid})"
        refusal = self._make_room()
        if refusal is not None:
            self._log.warning("connection_refused", conn=conn_id, peer=peer, reason=refusal.message)
            await _refuse(connection, refusal)
            return
        await self._serve(
            ClientSession(
                self._services,
                connection,
                conn_id=conn_id,
                peer=peer,
                principal=user.name,
                groups=user.groups,
            )
        )

    async def _serve(self, session: ClientSession) -> None:
        self.sessions[session.conn_id] = session
        try:
            await session.run()
        except Exception:
            # Last line of defence: one connection must never take the daemon down.
            self._log.exception("session_failed", conn=session.conn_id, peer=session.peer)
        finally:
            del self.sessions[session.conn_id]

    async def _admit(
        self, connection: RawConnection, conn_id: int, peer: str, ticket: Ticket
    ) -> tuple[trio.abc.Stream, str | None] | None:
        """The connection's stream and principal once it may be served (after the
        failure delay of its address and the TLS handshake), or None (closed)."""
        context = self._tls
        address = ticket.address
        deadline = ticket.opened_at + self._config.hello_timeout
        delay = self.admission.delay(address, trio.current_time())
        if context is None and not delay:
            return connection, None
        # It holds a slot from here: the handshake has hello_timeout, as a Hello has.
        self.handshakes += 1
        try:
            if delay:
                self._log.info("connection_delayed", conn=conn_id, peer=peer, seconds=delay)
                await trio.sleep(delay)
            if context is None:
                return connection, None
            try:
                # The Hello deadline counts from the connection's arrival.
                await start_tls(
                    connection, context, within=max(0.0, deadline - trio.current_time())
                )
            except TlsFailed as exc:
                if not exc.closed:
                    self._failed(address)
                log = self._log.debug if exc.closed else self._log.warning
                log("client_tls_refused", conn=conn_id, peer=peer, reason=str(exc))
                with trio.CancelScope(shield=True):
                    await connection.aclose()
                return None
            name = common_name(connection)
            problem = None if name is None else user_name_problem(name)
            if problem is not None:
                self._failed(address)
                self._log.warning(
                    "client_tls_refused",
                    conn=conn_id,
                    peer=peer,
                    reason=f"the client certificate's common name {problem}",
                )
                with trio.CancelScope(shield=True):
                    await connection.aclose()
                return None
            return connection, name
        finally:
            self.handshakes -= 1

    def authentication_failed(self, peer: str) -> None:
        """A token from ``peer`` was refused: it counts against its address (the
        session counts it in the authorization's tally)."""
        self.admission.failed(_address_of(peer), trio.current_time())

    def _failed(self, address: str) -> None:
        """A TLS handshake or a client certificate from ``address`` was refused."""
        self.admission.failed(address, trio.current_time())
        authorization = self._services.authorization
        if authorization is not None:
            authorization.tally.authentication_failures += 1

    def _make_room(self) -> QueueManagerError | None:
        """None if a new connection may be served now; else why it is refused."""
        if self._services.stopping:
            return ShuttingDown("the queue manager is shutting down")
        limit = self._config.max_connections
        if len(self.sessions) + self.handshakes < limit:
            return None
        unauthenticated = self.admission.oldest_unauthenticated()
        if unauthenticated is not None:
            unauthenticated.close(
                "closing this connection, which has not authenticated, to make room: the "
                f"queue manager serves at most {limit} client connections"
            )
            return None
        now = trio.current_time()
        idle = [
            (since, session)
            for session in self.sessions.values()
            if (since := session.idle_since) is not None
            and now - since >= self._config.evictable_after
        ]
        if idle:
            _, oldest = min(idle, key=lambda pair: pair[0])
            oldest.close_soon(
                f"closing this idle connection to make room: the queue manager serves "
                f"at most {limit} client connections"
            )
            return None
        return LimitExceeded(
            f"the queue manager serves at most {limit} client connections and none is idle; "
            "try again later"
        )


async def _refuse(connection: RawConnection, error: QueueManagerError | None) -> None:
    if error is not None:
        with trio.move_on_after(REFUSAL_TIMEOUT) as scope:
            scope.shield = True
            with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
                await connection.send_all(error_frame(0, error))
    with trio.CancelScope(shield=True):
        await connection.aclose()


def _address_of(peer: str) -> str:
    """The address part of a peer name, ``host:port`` or ``[v6]:port`` (the name
    itself when it has no port: ``unknown``)."""
    return peer.rpartition(":")[0].removeprefix("[").removesuffix("]") or peer
