"""The queue-manager daemon: ``qmgr serve``.

Theory of operation
-------------------
:func:`serve` opens the store, creates the system queues on first start and
reserves message ids (written before any client is served), starts the
committer and the background work, listens for clients, and runs until
SIGTERM or SIGINT (or until its cancel scope is cancelled by an embedding
program or test).

Connections. At most ``max_connections`` are served. When all are taken, a
new client replaces the connection that has been idle the longest (no open
transaction, no waiting receive, silent for at least
``evictable_after`` seconds), which is told why before it is closed;
if none is idle, the new client is refused with an error frame saying so.

Poison handling's writes (the counts and moves aborts decide, returns from
``;retry``) are a task of their own (``poison_worker``).

Shutdown is ordered so that nothing half-done survives: stop accepting,
close client sessions (each aborts its open transactions; a commit already
handed to the committer finishes first, because that wait is shielded), stop
the committer once no session is left to submit to it, stop the writer
thread, and close the store. A crash skips all of this and loses nothing
committed: open transactions live only in memory and are aborted by
forgetting them.
"""

from __future__ import annotations

import contextlib
import errno
import gc
import itertools
import signal
import socket
import sys
import time
from collections.abc import Callable
from typing import Any, Final

import structlog
import trio

import storage
from qmgr import __version__
from qmgr.config import Address, Config
from qmgr.core.budget import MemoryBudget
from qmgr.core.engine import Limits, QueueManagerCore
from qmgr.core.errors import LimitExceeded, QueueManagerError, ShuttingDown
from qmgr.core.names import LocalIdentity
from qmgr.core.tokens import TokenBook, read_tokens_file
from storage import QueueKind, Store
from wire import client_frames as cf

from .admission import Admission, AdmissionLimits
from .authorization import Authorization
from .committer import Committer
from .connection import RawConnection
from .expirer import Expirer
from .maintenance import Maintenance
from .peering import Peering
from .poison_worker import PoisonWorker
from .replies import error_frame
from .requests import queue_info
from .services import ConnectionLimits, Services
from .session import ClientSession
from .signals import QueueSignals, Wakeup
from .tls import TlsContexts, TlsFailed, check_exposure, common_name, handshake, load_contexts
from .unix_socket import local_user, open_unix_listener, remove_socket
from .writer import Writer

__all__ = ["Daemon", "StartupError", "serve"]

#: How long the error frame of a refused connection may take to write.
REFUSAL_TIMEOUT: Final = 1.0


class StartupError(Exception):
    """The daemon cannot start (store unusable, port taken, ...)."""


class Daemon:
    """The parts of one running queue manager, and its connections."""

    def __init__(
        self,
        config: Config,
        store: Store,
        tls: TlsContexts | None = None,
        tokens: TokenBook | None = None,
    ) -> None:
        self.config = config
        self.store = store
        self.tls = tls if tls is not None else TlsContexts(None, None, None)
        self.log = structlog.get_logger("qmgr.daemon").bind(qm=config.name)
        identity = LocalIdentity(
            host_names=frozenset({"localhost", socket.gethostname().lower(), config.name.lower()}),
            addresses=frozenset({"127.0.0.1", "::1"} | _listen_addresses(config)),
            peer_port=config.listen.port,
            listens_everywhere=config.listen.host in _WILDCARDS,
        )
        self.core = QueueManagerCore(
            store,
            identity=identity,
            limits=Limits(
                max_transaction_operations=config.tx_max_operations,
                max_transaction_bytes=config.tx_max_bytes,
                max_uncommitted_bytes=config.max_uncommitted_bytes,
                max_prepared=config.tx_max_prepared,
                outcome_retention=config.tx_outcome_retention,
                xact_delay_receive_nack=(
                    None
                    if config.tx_xact_delay_receive_nack < 0
                    else config.tx_xact_delay_receive_nack
                ),
            ),
        )
        self.writer = Writer(store, thread=config.writer_thread)
        self.committer = Committer(store, self.writer)
        self.signals = QueueSignals()
        wakeup = Wakeup()
        self.maintenance = Maintenance(
            store=store,
            core=self.core,
            committer=self.committer,
            signals=self.signals,
            wakeup=wakeup,
            erase_step=config.erase_step,
            idle_timeout=config.tx_idle_timeout,
        )
        self.poison = PoisonWorker(
            core=self.core, committer=self.committer, signals=self.signals, log=self.log
        )
        self.expirer = Expirer(core=self.core, committer=self.committer, signals=self.signals)
        self.services = Services(
            core=self.core,
            committer=self.committer,
            signals=self.signals,
            frames=MemoryBudget(config.max_frame_bytes, what="frames being received"),
            limits=ConnectionLimits(
                hello_timeout=config.hello_timeout,
                frame_timeout=config.frame_timeout,
                idle_timeout=config.idle_timeout,
                max_transactions=config.max_transactions_per_connection,
                max_waiting_receives=config.max_waiting_receives_per_connection,
            ),
            qm_name=config.name,
            qm_guid=store.qm_guid,
            server_version=__version__,
            status=self.status,
            queue_infos=self.queue_infos,
            maintenance=wakeup,
        )
        self.peering = Peering(
            config=config,
            store=store,
            committer=self.committer,
            signals=self.signals,
            identity=identity,
            outcomes=self.core.outcomes,
            confirmations=self.core.confirmations,
            log=self.log,
            tls=self.tls,
        )
        self.services.peering = self.peering
        self.services.authorization = Authorization(
            self.core,
            enabled=config.auth_required,
            admins=config.auth_admins,
            groups=config.auth_groups,
            default_acl=config.auth_default_acl,
            tokens=tokens,
        )
        self.services.authentication_failed = self._authentication_failed
        self.peering.authorization = self.services.authorization
        self.expirer.peering = self.peering
        self.sessions: dict[int, ClientSession] = {}
        #: Client connections in their TLS handshake (they count against max_connections).
        self.handshakes = 0
        self.admission = Admission(
            AdmissionLimits(
                max_connections_per_address=config.max_connections_per_address,
                failure_limit=config.auth_failure_limit,
                failure_delay=config.auth_failure_delay,
            )
        )
        self.started_at = time.time()
        self.stop_requested = trio.Event()
        self._conn_ids = itertools.count(1)

    @property
    def stopping(self) -> bool:
        """True once an orderly shutdown began."""
        return self.services.stopping

    def stop(self) -> None:
        """Begin an orderly shutdown (what SIGTERM does)."""
        self.stop_requested.set()

    def start_up(self) -> None:
        """Write what must exist before any client is served: the system queues and
        the first message-id reservation (on this thread, before the writer runs).

        Raises:
            StartupError: the store cannot be written.
        """
        core = self.core
        prepared = core.two_phase.prepared_count
        if prepared:
            self.log.warning("prepared_transactions_in_doubt", count=prepared)
        units = core.system_queue_units(time.time())
        # Queues made before subqueues existed get theirs (MSMQ makes them on first use).
        units.extend(core.poison.subqueue_units(time.time()))
        reservation = core.ordinal_reservation()
        if reservation is not None:
            units.append(reservation)
        if not units:
            return
        try:
            outcomes = self.store.commit(units, now=time.time())
        except Exception as exc:
            msg = f"cannot write to the store in {self.config.data_dir}: {exc}"
            raise StartupError(msg) from exc
        for unit, outcome in zip(units, outcomes, strict=True):
            if reservation is unit:
                core.ordinals_reserved(unit, outcome)
            elif not unit.atomic:
                made = [r for r in outcome.results if isinstance(r, storage.SubqueuesCreated)]
                self.log.info("subqueues_created", queues=sum(len(r.records) for r in made))
            elif outcome.error is None:
                self.log.info("system_queue_created", queue=unit.ops[0].name)  # type: ignore[attr-defined]

    def queue_infos(self) -> tuple[cf.QueueInfo, ...]:
        """Every queue with its counters."""
        core = self.core
        return tuple(
            queue_info(q, core.held_count(q.queue_id))
            for q in core.list_queues()
            if q.kind is not QueueKind.OUTGOING
        )

    def status(self) -> cf.StatusInfo:
        """Identity, activity counters and queues, for ``qmgr status``."""
        core = self.core
        return cf.StatusInfo(
            qm_name=self.config.name,
            qm_guid=self.store.qm_guid,
            server_version=__version__,
            started_at=self.started_at,
            connections=len(self.sessions),
            open_transactions=core.open_transactions,
            commits=core.commits,
            aborts=core.aborts,
            batches=self.committer.batches,
            uncommitted_bytes=core.uncommitted.in_use,
            erasing=len(self.store.queues_to_erase()),
            queues=self.queue_infos(),
            outgoing=self.peering.outgoing_infos(),
            incoming=self.peering.incoming_infos(),
        )

    async def handle_connection(self, stream: trio.SocketStream) -> None:
        """Serve one client connection (the listener's handler)."""
        connection = RawConnection(stream)
        _tune_socket(connection)
        conn_id = next(self._conn_ids)
        peer = connection.peer_name()
        address = peer.rpartition(":")[0] or peer
        refusal = self._make_room()
        if refusal is None and (why := self.admission.refusal(address)) is not None:
            refusal = LimitExceeded(why)
        if refusal is not None:
            self.log.warning("connection_refused", conn=conn_id, peer=peer, reason=refusal.message)
            # Over TLS nothing can be said before the handshake: the refusal is the close.
            await _refuse(connection, None if self.tls.clients else refusal)
            return
        self.admission.opened(address)
        try:
            admitted = await self._admit(connection, conn_id, peer, address)
            if admitted is None:
                return
            client, principal = admitted
            await self._serve(
                ClientSession(
                    self.services, client, conn_id=conn_id, peer=peer, principal=principal
                )
            )
        finally:
            self.admission.closed(address)

    async def handle_local_connection(self, stream: trio.SocketStream) -> None:
        """Serve one client of the Unix-domain socket, known by its local user."""
        conn_id = next(self._conn_ids)
        try:
            user = local_user(stream.socket)
        except OSError as exc:
            self.log.warning("connection_refused", conn=conn_id, peer="unix", reason=str(exc))
            await stream.aclose()
            return
        connection = RawConnection(stream)
        peer = f"unix:{user.name}(pid {user.pid})"
        refusal = self._make_room()
        if refusal is not None:
            self.log.warning("connection_refused", conn=conn_id, peer=peer, reason=refusal.message)
            await _refuse(connection, refusal)
            return
        await self._serve(
            ClientSession(
                self.services,
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
            self.log.exception("session_failed", conn=session.conn_id, peer=session.peer)
        finally:
            del self.sessions[session.conn_id]

    async def _admit(
        self, connection: RawConnection, conn_id: int, peer: str, address: str
    ) -> tuple[trio.abc.Stream, str | None] | None:
        """The connection's stream and principal once it may be served (after the
        failure delay of its address and the TLS handshake), or None (closed)."""
        context = self.tls.clients
        delay = self.admission.delay(address, trio.current_time())
        if context is None and not delay:
            return connection, None
        # It holds a slot from here: the handshake has hello_timeout, as a Hello has.
        self.handshakes += 1
        try:
            if delay:
                self.log.info("connection_delayed", conn=conn_id, peer=peer, seconds=delay)
                await trio.sleep(delay)
            if context is None:
                return connection, None
            try:
                secure = await handshake(
                    connection, context, server_side=True, within=self.config.hello_timeout
                )
            except TlsFailed as exc:
                if not exc.closed:
                    self.admission.failed(address, trio.current_time())
                log = self.log.debug if exc.closed else self.log.warning
                log("client_tls_refused", conn=conn_id, peer=peer, reason=str(exc))
                with trio.CancelScope(shield=True):
                    await connection.aclose()
                return None
            return secure, common_name(secure)
        finally:
            self.handshakes -= 1

    def _authentication_failed(self, peer: str) -> None:
        self.admission.failed(peer.rpartition(":")[0] or peer, trio.current_time())

    def _make_room(self) -> QueueManagerError | None:
        """None if a new connection may be served now; else why it is refused."""
        if self.stopping:
            return ShuttingDown("the queue manager is shutting down")
        limit = self.config.max_connections
        if len(self.sessions) + self.handshakes < limit:
            return None
        now = trio.current_time()
        idle = [
            (since, session)
            for session in self.sessions.values()
            if (since := session.idle_since) is not None
            and now - since >= self.config.evictable_after
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


async def serve(
    config: Config,
    *,
    install_signal_handlers: bool = True,
    task_status: trio.TaskStatus[tuple[str, int]] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Run a queue manager until SIGTERM/SIGINT or cancellation.

    ``task_status.started`` receives the client listener's bound (host, port),
    which matters when the configured port is 0.

    Raises:
        StartupError: the store cannot be opened or the port cannot be bound.
    """
    log = structlog.get_logger("qmgr.daemon").bind(qm=config.name)
    try:
        allowed = check_exposure(config)
        tls = load_contexts(config)
        tokens = load_tokens(config)
    except ValueError as exc:
        raise StartupError(str(exc)) from exc
    for problem in allowed:
        log.warning("listener_not_protected", problem=problem, allowed_by="server.insecure")
    try:
        store = Store(
            config.data_dir,
            initial_map_size=config.initial_map_size,
            max_map_size=config.max_map_size,
            reserve_size=config.reserve_size,
        )
    except Exception as exc:
        msg = f"cannot open the store in {config.data_dir}: {exc}"
        raise StartupError(msg) from exc
    daemon: Daemon | None = None
    local: trio.SocketListener | None = None
    try:
        daemon = Daemon(config, store, tls, tokens)
        daemon.start_up()
        if not store.has_ballast:
            log.warning("store_reserve_missing", reserve_size=config.reserve_size)
        # The client port last: once it answers, every listener does (the local
        # socket and the peer port too), so whoever waits for it may use them all.
        if config.unix_socket is not None:
            try:
                local = await open_unix_listener(config.unix_socket)
            except OSError as exc:
                msg = f"cannot listen for local clients on {config.unix_socket}: {exc}"
                raise StartupError(msg) from exc
        peer_listeners = await _listen(config.listen, "peers")
        peer_bound = peer_listeners[0].socket.getsockname()
        listeners = await _listen(config.client_listen, "clients")
        bound = listeners[0].socket.getsockname()
        async with trio.open_nursery() as outer:
            await outer.start(daemon.committer.run)
            outer.start_soon(daemon.maintenance.run)
            outer.start_soon(daemon.poison.run)
            outer.start_soon(daemon.expirer.run)
            async with trio.open_nursery() as inner:
                if install_signal_handlers:
                    inner.start_soon(_watch_signals, daemon.stop, log)
                await inner.start(daemon.peering.run, peer_listeners)
                inner.start_soon(trio.serve_listeners, daemon.handle_connection, listeners)
                if local is not None:
                    inner.start_soon(trio.serve_listeners, daemon.handle_local_connection, [local])
                log.info(
                    "queue_manager_started",
                    guid=str(store.qm_guid),
                    data_dir=str(config.data_dir),
                    client_listen=f"{bound[0]}:{bound[1]}",
                    unix_socket=None if local is None else str(config.unix_socket),
                    peer_listen=f"{peer_bound[0]}:{peer_bound[1]}",
                    tls_clients=tls.clients is not None,
                    tls_peers=tls.peer_server is not None,
                    auth_required=config.auth_required,
                    accept_peers_from=[str(network) for network in config.peer_accept_from],
                    routes=len(config.routes),
                    outgoing_queues=len(daemon.peering.outgoing),
                    writer="thread" if config.writer_thread else "event loop",
                    version=__version__,
                    python=sys.version.split()[0],
                )
                # Everything made so far (modules, the daemon's parts) lives as long
                # as the daemon: keep it out of every garbage collection, which
                # would otherwise walk it all and pause the event loop for
                # milliseconds (measured: 13.6 ms for a full collection).
                gc.freeze()
                task_status.started((bound[0], bound[1]))
                try:
                    await daemon.stop_requested.wait()
                finally:
                    # Open transactions end with their sessions, aborted.
                    aborted = daemon.core.open_transactions
                    daemon.services.stopping = True
                    daemon.signals.notify_all()
                    inner.cancel_scope.cancel()
            # Every session is gone: nothing can submit to the committer any more.
            outer.cancel_scope.cancel()
        log.info("queue_manager_stopped", open_transactions_aborted=aborted)
    finally:
        if daemon is not None:
            daemon.writer.close()
        if config.unix_socket is not None and local is not None:
            remove_socket(config.unix_socket)
        store.close()


async def _watch_signals(
    stop: Callable[[], Any], log: structlog.typing.FilteringBoundLogger
) -> None:
    with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
        async for signum in signals:
            log.info("shutdown_requested", signal=signal.Signals(signum).name)
            stop()
            return


async def _listen(address: Address, what: str) -> list[trio.SocketListener]:
    try:
        return await trio.open_tcp_listeners(address.port, host=address.host)
    except OSError as exc:
        reason = "address already in use" if exc.errno == errno.EADDRINUSE else exc.strerror
        msg = f"cannot listen for {what} on {address}: {reason}"
        raise StartupError(msg) from exc


#: Listen addresses that take every address of the host.
_WILDCARDS: Final = ("", "0.0.0.0", "::")


def load_tokens(config: Config) -> TokenBook:
    """The tokens of ``auth.tokens`` and ``auth.tokens_file``.

    Raises:
        ValueError: the file cannot be read, or a hash is malformed.
    """
    hashes = dict(config.auth_tokens)
    if config.auth_tokens_file is not None:
        hashes.update(read_tokens_file(config.auth_tokens_file))
    return TokenBook(hashes)


def _listen_addresses(config: Config) -> set[str]:
    """The peer listener's own address, when it names one (not a wildcard)."""
    host = config.listen.host
    return set() if host in _WILDCARDS else {host.lower()}


def _tune_socket(connection: RawConnection) -> None:
    with contextlib.suppress(OSError):
        connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, True)
