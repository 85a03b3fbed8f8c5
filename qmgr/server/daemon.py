"""The queue-manager daemon: ``qmgr serve``, the composition of the parts.

Theory of operation
-------------------
:class:`Daemon` puts the parts together, each given what it needs and none
knowing the daemon:

* the **core** (``qmgr.core``), which decides and never writes;
* the **committer** and its **writer**, the one place that writes, and
  the **signals** that wake readers blocked on empty queues;
* the **peering** side (``peering``): delivery between queue managers;
* the **client** side (``client``): the services sessions use, queue
  permissions, and the port that accepts connections;
* the **workers** (``workers``): expiry, poison handling, maintenance;
* the **HTTP listener** (``http``): ``/healthz`` and ``/metrics``, which
  reads the others' counters when it is scraped, and the JSON API
  (``/api/v1/...``), which runs the client requests' handlers on the
  services the sessions use (``client.operations``).

:func:`serve` checks the configuration (exposure, certificates, tokens;
a problem is a :class:`ConfigurationError`, exit status 2), raises the
open-files limit to what the connection bounds need (``open_files``), binds
every listener (``listeners``), and only then opens the store, creates the system
queues on first start and reserves message ids (written before any client
is served: :meth:`Daemon.start_up`), and runs the daemon
(:meth:`Daemon.run`): the committer and the workers, then the listeners,
until SIGTERM, SIGINT or SIGHUP (or until its cancel scope is cancelled by an
embedding program or test).

Shutdown is ordered so that nothing half-done survives: stop accepting,
close client sessions (each aborts its open transactions; a commit already
handed to the committer finishes first, because that wait is shielded), stop
the workers, write what the next start needs (the outgoing queues' sent marks,
and the message-id limit reached, giving back the ids reserved and never used),
stop the committer once nothing is left to submit, stop the writer thread, and
close the store. A crash skips all of this and loses
nothing committed: open transactions live only in memory and are aborted by
forgetting them.
"""

from __future__ import annotations

import dataclasses
import functools
import gc
import itertools
import signal
import sys
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import structlog
import trio

import storage
from qmgr import __version__
from qmgr.config import Config, local_identity
from qmgr.core.budget import MemoryBudget
from qmgr.core.engine import QueueManagerCore
from qmgr.core.errors import QueueManagerError
from qmgr.core.limits import Limits
from qmgr.core.routes import endpoint_text, socket_address_text
from qmgr.core.tokens import TokenBook, load_tokens
from qmgr.logs import LOG_STREAM
from storage import QueueKind, QueueRecord, Store
from wire import client as cf

from .client.accept import ClientPort
from .client.authorization import Authorization
from .client.handlers.replies import queue_info
from .client.services import ConnectionLimits, Services
from .committer import Committer
from .listeners import (
    TCP_BACKLOG,
    ConfigurationError,
    StartupError,
    StoreUnusable,
    bind_tcp,
    bind_udp,
    bind_unix_socket,
    listen_on,
    remove_socket,
)
from .open_files import check_open_files
from .peering import Peering
from .peering.outgoing_queue import clear_sent_marks, sent_marks
from .settings import from_config
from .signals import QueueSignals, Wakeup
from .tls import TlsContexts, check_exposure, key_file_warnings, load_contexts
from .workers.expirer import Expirer
from .workers.maintenance import Maintenance
from .workers.outgoing_expiry import expire_outgoing

if TYPE_CHECKING:
    from .http import HttpPort
from .workers.poison import PoisonWorker
from .writer import Writer

__all__ = ["ConfigurationError", "Daemon", "StartupError", "serve"]


@dataclass(frozen=True, slots=True)
class Sockets:
    """The daemon's bound sockets (not listening yet)."""

    local: trio.socket.SocketType | None
    peers: list[trio.socket.SocketType]
    clients: list[trio.socket.SocketType]
    #: The HTTP listener's (none when ``http.listen`` is off).
    http: list[trio.socket.SocketType] = dataclasses.field(default_factory=list)
    #: The ping port's, UDP (none unless ``peers.ping`` is on).
    ping: list[trio.socket.SocketType] = dataclasses.field(default_factory=list)


class Daemon:
    """The parts of one running queue manager (see the module docstring)."""

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
        self.started_at = time.time()
        # queue_infos' values, by queue id: (the record, its held count, the value).
        self._queue_infos: dict[int, tuple[QueueRecord, int, cf.QueueInfo]] = {}
        self.stop_requested = trio.Event()
        self._spare_ids = itertools.count(1)
        delay = config.tx_xact_delay_receive_nack
        #: Queue semantics: decides, reads the store, never writes.
        self.core = QueueManagerCore(
            store,
            identity=local_identity(config),
            limits=from_config(
                Limits, config, xact_delay_receive_nack=None if delay < 0 else delay
            ),
            router=config.peer_router,
        )
        core = self.core
        # The one place that writes, and the wake-ups of blocked readers.
        self.writer = Writer(store, thread=config.writer_thread)
        self.committer = committer = Committer(store, self.writer)
        self.signals = signals = QueueSignals()
        #: Delivery between queue managers.
        self.peering = Peering(
            config=config,
            store=store,
            committer=committer,
            signals=signals,
            identity=core.identity,
            outcomes=core.outcomes,
            confirmations=core.confirmations,
            log=self.log,
            tls=self.tls,
            message_ids=self._control_message_id,
        )
        #: The client side: what sessions use, and the ports that accept them.
        self.services = Services(
            core=core,
            committer=committer,
            signals=signals,
            frames=MemoryBudget(config.max_frame_bytes, what="frames being received"),
            replies=MemoryBudget(config.max_reply_bytes, what="large replies being written"),
            limits=from_config(ConnectionLimits, config),
            qm_name=config.name,
            qm_guid=store.qm_guid,
            server_version=__version__,
            status=self.status,
            queue_infos=self.queue_infos,
            maintenance=Wakeup(),
            peering=self.peering,
            authorization=self._authorization(tokens),
        )
        self.clients = ClientPort(config, self.services, self.tls.clients, self.log)
        # The background workers.
        self.maintenance = Maintenance(
            store=store,
            core=core,
            committer=committer,
            signals=signals,
            wakeup=self.services.maintenance,
            erase_step=config.erase_step,
            idle_timeout=config.tx_idle_timeout,
        )
        #: The HTTP listener (None: ``http.listen`` is off).
        self.http: HttpPort | None = None
        if config.http_listen is not None:
            self.http = self._http_port()
        self.poison = PoisonWorker(core=core, committer=committer, signals=signals, log=self.log)
        self.expirer = Expirer(
            core=core,
            committer=committer,
            signals=signals,
            outgoing=functools.partial(expire_outgoing, self.peering),
        )

    def _authorization(self, tokens: TokenBook | None) -> Authorization:
        """Queue permissions, for clients and for messages from peers."""
        config = self.config
        authorization = Authorization(
            self.core,
            enabled=config.auth_required,
            admins=config.auth_admins,
            groups=config.auth_groups,
            default_acl=config.auth_default_acl,
            tokens=tokens,
            monitors=config.auth_monitors,
        )
        authorization.identities_of = self.peering.identities.identities_of
        self.peering.authorization = authorization
        if config.auth_required:
            self.core.outcomes.refuses_acknowledgment = authorization.refuses_acknowledgment
        return authorization

    def _http_port(self) -> HttpPort:
        """The HTTP listener, reading the parts' counters when it is scraped (its
        libraries, some 9 MB of memory, are imported only at its first connection)."""
        from .client.operations import Operations
        from .http import MetricsSources, http_port
        from .http.sources import lookup_skipped

        authorization = self.services.authorization
        assert authorization is not None
        sources = MetricsSources(
            name=self.config.name,
            version=__version__,
            store=self.store,
            core=self.core,
            committer=self.committer,
            tally=authorization.tally,
            peering=self.peering,
            connections=self.connections,
            data_dir=self.store.path,
            lookup_skipped=lookup_skipped(self.store),
            log_write_failures=lambda: LOG_STREAM.dropped,
        )
        try:
            return http_port(
                self.config,
                sources=sources,
                authorization=authorization,
                tls=self.tls.http,
                stopping=lambda: self.stopping,
                log=self.log,
                operations=Operations(self.services),
            )
        except ImportError as exc:  # a broken installation: said at start-up
            msg = f"cannot serve HTTP: {exc}"
            raise StartupError(msg) from exc

    def connections(self) -> dict[str, int]:
        """Open connections by port: clients (TCP and local socket), peers, HTTP."""
        clients = self.clients
        return {
            "client": len(clients.sessions) + clients.handshakes,
            "peer": self.peering.sessions(),
            "http": 0 if self.http is None else len(self.http.connections),
        }

    @property
    def workers(self) -> tuple[Callable[[], Awaitable[None]], ...]:
        """The background workers' tasks (the FinalAck courier is the peering side's)."""
        return (self.maintenance.run, self.poison.run, self.expirer.run)

    @property
    def stopping(self) -> bool:
        """True once an orderly shutdown began."""
        return self.services.stopping

    def stop(self) -> None:
        """Begin an orderly shutdown (what SIGTERM does)."""
        self.stop_requested.set()

    def start_up(self) -> None:
        """Write what must exist before any client is served: the system queues and
        the first message-id reservation (on this thread, before the writer runs),
        and the clearing of the outgoing queues' sent marks, which the peering
        layer read when it was made (before this raises the message-id limit:
        ``outgoing_queue.read_sent_marks``).

        Raises:
            StartupError: the store cannot be written.
        """
        core = self.core
        prepared = core.two_phase.prepared_count
        if prepared:
            self.log.warning("prepared_transactions_in_doubt", count=prepared)
        units = core.queues.system_queue_units(time.time())
        # Queues made before subqueues existed get theirs (MSMQ makes them on first use).
        units.extend(core.queues.subqueue_units(time.time()))
        reservation = core.ordinal_reservation()
        if reservation is not None:
            units.append(reservation)
        marks = None
        if self.peering.outgoing_queues.marks_read:
            marks = storage.Unit((clear_sent_marks(),))
            units.append(marks)
        renewed = None
        if self.store.get_setting(storage.RENEWED) is not None:
            # Started after ``qmgr restored``: a later renewal is a new one.
            renewed = storage.Unit((storage.ClearSetting(storage.RENEWED),))
            units.append(renewed)
        if not units:
            return
        try:
            outcomes = self.store.commit(units, now=time.time())
        except Exception as exc:
            msg = f"cannot write to the store in {self.config.data_dir}: {exc}"
            raise StartupError(msg) from exc
        for unit, outcome in zip(units, outcomes, strict=True):
            if marks is unit:
                if outcome.error is not None:  # it only frees space: not for want of room
                    # Left standing, the marks would be trusted after a crash of this
                    # run for what it sends: a message sent would count as never sent.
                    msg = f"cannot clear the outgoing queues' marks: {outcome.error}"
                    raise StartupError(msg)
            elif renewed is unit:
                if outcome.error is not None:  # it only frees space: not for want of room
                    # Left standing, the mark would make a backup of this run look
                    # prepared already to ``qmgr restored``.
                    msg = f"cannot clear the mark of qmgr restored: {outcome.error}"
                    raise StartupError(msg)
                self.log.info("started_after_restore")
            elif reservation is unit:
                failure = core.ordinals_reserved(unit, outcome)
                if failure is not None:
                    # Sends fail with this error until the maintenance worker's
                    # retry gets the reservation written (room freed).
                    self.log.warning("message_id_reservation_failed", error=failure.message)
            elif not unit.atomic:
                made = [r for r in outcome.results if isinstance(r, storage.SubqueuesCreated)]
                self.log.info("subqueues_created", queues=sum(len(r.records) for r in made))
            elif outcome.error is None:
                self.log.info("system_queue_created", queue=unit.ops[0].name)  # type: ignore[attr-defined]

    async def run(
        self,
        sockets: Sockets,
        *,
        install_signal_handlers: bool = True,
        task_status: trio.TaskStatus[tuple[str, int]] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        """Serve on the bound sockets until asked to stop (see the module docstring);
        ``task_status.started`` receives the client port's bound (host, port)."""
        # The client port last: once it answers, every listener does (the local
        # socket, the peer port and the HTTP listener too), so whoever waits for
        # it may use them all.
        local = None if sockets.local is None else listen_on(sockets.local)
        peers = [listen_on(sock, TCP_BACKLOG) for sock in sockets.peers]
        http = [listen_on(sock, TCP_BACKLOG) for sock in sockets.http]
        clients = [listen_on(sock, TCP_BACKLOG) for sock in sockets.clients]
        bound = sockets.clients[0].getsockname()
        async with trio.open_nursery() as outer:
            await outer.start(self.committer.run)
            workers = await outer.start(_run_all, self.workers)
            async with trio.open_nursery() as inner:
                if install_signal_handlers:
                    inner.start_soon(_watch_signals, self.stop, self.log)
                await inner.start(self.peering.run, peers)
                if sockets.ping:
                    inner.start_soon(self.peering.serve_pings, sockets.ping)
                if self.http is not None and http:
                    inner.start_soon(self.http.serve, http)
                inner.start_soon(trio.serve_listeners, self.clients.handle_connection, clients)
                if local is not None:
                    handler = self.clients.handle_local_connection
                    inner.start_soon(trio.serve_listeners, handler, [local])
                self._log_started(sockets)
                # Everything made so far (modules, the daemon's parts) lives as long
                # as the daemon: keep it out of every garbage collection, which
                # would otherwise walk it all and pause the event loop for
                # milliseconds (measured: 13.6 ms for a full collection).
                gc.freeze()
                task_status.started((bound[0], bound[1]))
                try:
                    await self.stop_requested.wait()
                finally:
                    # Open transactions end with their sessions, aborted (a
                    # commit already handed to the committer is finished and
                    # answered, and is not counted).
                    aborts_before = self.core.tally.aborts
                    self.services.stopping = True
                    self.signals.notify_all()
                    inner.cancel_scope.cancel()
            aborted = self.core.tally.aborts - aborts_before
            # The workers stop too: nothing makes a message any more.
            workers.cancel()
            # No link sends any more: what each outgoing queue may have sent, so
            # that the next start can give up on time what never went out; and
            # the message ids reserved and never used go back.
            await self._write_stop_marks()
            # Every session is gone: nothing can submit to the committer any more.
            outer.cancel_scope.cancel()
        self.log.info("queue_manager_stopped", open_transactions_aborted=aborted)

    async def _write_stop_marks(self) -> None:
        """Write at an orderly stop the outgoing queues' marks and the message-id
        limit the daemon reached (``storage.ReturnOrdinals``); a failure is logged
        (the next start then counts every stored entry as perhaps sent, and
        skips the rest of the last block of ids)."""
        limit = self.core.ordinals.give_back()
        queues = self.peering.outgoing.values()
        ops: list[storage.Operation] = [sent_marks(self.store, queues, ordinal_limit=limit)]
        if limit is not None:
            ops.append(storage.ReturnOrdinals(limit))
        try:
            outcome = await self.committer.submit(storage.Unit(tuple(ops)))
        except Exception as exc:  # the committer failed: a crash would write nothing either
            self.log.warning("outgoing_marks_not_written", error=str(exc))
            return
        if outcome.error is not None:
            self.log.warning("outgoing_marks_not_written", error=str(outcome.error))

    def _log_started(self, sockets: Sockets) -> None:
        config, tls = self.config, self.tls
        client, peer = sockets.clients[0].getsockname(), sockets.peers[0].getsockname()
        self.log.info(
            "queue_manager_started",
            guid=str(self.store.qm_guid),
            data_dir=str(config.data_dir),
            client_listen=socket_address_text(client),
            unix_socket=None if sockets.local is None else str(config.unix_socket),
            peer_listen=socket_address_text(peer),
            http_listen=_address(sockets.http[0]) if sockets.http else None,
            ping_listen=_address(sockets.ping[0]) if sockets.ping else None,
            tls_http=tls.http is not None,
            tls_clients=tls.clients is not None,
            tls_peers=tls.peer_server is not None,
            auth_required=config.auth_required,
            accept_peers_from=[str(network) for network in config.peer_accept_from],
            routes=len(config.routes),
            router=config.peer_router,
            aliases=[endpoint_text(host, port) for host, port in config.aliases],
            outgoing_queues=len(self.peering.outgoing),
            writer="thread" if config.writer_thread else "event loop",
            version=__version__,
            python=sys.version.split()[0],
        )

    def queue_infos(self) -> tuple[cf.QueueInfo, ...]:
        """Every queue with its counters. A queue's record is replaced whenever it
        changes, so the value made from it is kept while the record and its held
        count stay the same: listing tens of thousands of idle queues (``queue
        list``, ``status``, the console's pages every 2 s) costs a lookup each."""
        core = self.core
        kept = self._queue_infos
        infos = []
        seen = set()
        for record in core.queues.all():
            if record.kind is QueueKind.OUTGOING:
                continue
            seen.add(record.queue_id)
            held = core.holds.count(record.queue_id)
            found = kept.get(record.queue_id)
            if found is None or found[0] is not record or found[1] != held:
                found = kept[record.queue_id] = (record, held, queue_info(record, held))
            infos.append(found[2])
        if len(kept) > len(seen):  # queues were deleted: forget theirs
            for queue_id in kept.keys() - seen:
                del kept[queue_id]
        return tuple(infos)

    def _control_message_id(self) -> int:
        """A message-id ordinal for an OrderAck or a FinalAck, from the one allocator
        of this queue manager's message ids (unique across restarts; a peer drops a
        repeated id as a duplicate). Taking one may make a reservation due: the
        maintenance worker writes it. When none is free (a reservation not written
        yet), one from a count of this run's own: an OrderAck or FinalAck lost as a
        duplicate is sent again later."""
        ordinals = self.core.ordinals
        try:
            ordinal = ordinals.take()
        except QueueManagerError:
            ordinal = next(self._spare_ids)
        if ordinals.wanted:
            self.services.wake_maintenance()
        return ordinal

    def status(self) -> cf.StatusInfo:
        """Identity, activity counters and queues, for ``qmgr status``."""
        core = self.core
        return cf.StatusInfo(
            qm_name=self.config.name,
            qm_guid=self.store.qm_guid,
            server_version=__version__,
            started_at=self.started_at,
            connections=len(self.clients.sessions),
            open_transactions=len(core.transactions),
            commits=core.tally.commits,
            aborts=core.tally.aborts,
            batches=self.committer.batches,
            uncommitted_bytes=core.uncommitted.in_use,
            erasing=len(self.store.queues_to_erase()),
            queues=self.queue_infos(),
            outgoing=self.peering.outgoing_infos(),
            incoming=self.peering.incoming_infos(),
        )


async def serve(
    config: Config,
    *,
    install_signal_handlers: bool = True,
    task_status: trio.TaskStatus[tuple[str, int]] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Run a queue manager until SIGTERM/SIGINT/SIGHUP or cancellation.

    ``task_status.started`` receives the client listener's bound (host, port),
    which matters when the configured port is 0.

    Start-up checks the configuration (exposure, certificates, tokens), raises
    the open-files limit to what the connection bounds need (``open_files``),
    then binds every listener, and only then opens the store: a port in use or
    a bad setting leaves nothing behind in the data directory.

    Raises:
        ConfigurationError: the configuration cannot be served (exit status 2).
        StartupError: the store cannot be opened or a port cannot be bound.
    """
    log = structlog.get_logger("qmgr.daemon").bind(qm=config.name)
    try:
        allowed = check_exposure(config)
        tls = load_contexts(config)
        tokens, warnings = load_tokens(config.auth_tokens, config.auth_tokens_file)
    except ValueError as exc:
        raise ConfigurationError(str(exc)) from exc
    for warning in warnings:
        log.warning("tokens_file_readable", problem=warning)
    for warning in key_file_warnings(config):
        log.warning("tls_key_readable", problem=warning)
    for problem in allowed:
        log.warning("listener_not_protected", problem=problem, allowed_by="server.insecure")
    # Before any listener: every connection the bounds allow needs a descriptor.
    check_open_files(config, log)
    bound: list[trio.socket.SocketType] = []
    local: trio.socket.SocketType | None = None
    try:
        # Bound, not listening: a client that finds the port open finds it served.
        if config.unix_socket is not None:
            try:
                local = await bind_unix_socket(config.unix_socket)
            except OSError as exc:
                msg = f"cannot listen for local clients on {config.unix_socket}: {exc}"
                raise StartupError(msg) from exc
        peer_sockets = await bind_tcp(config.listen, "peers", bound)
        ping_sockets = []
        if config.peer_ping:
            ping_address = dataclasses.replace(config.listen, port=config.peer_ping_port)
            ping_sockets = await bind_udp(ping_address, "pings (UDP)", bound)
        http_sockets = []
        if config.http_listen is not None:
            http_sockets = await bind_tcp(config.http_listen, "HTTP", bound)
        client_sockets = await bind_tcp(config.client_listen, "clients", bound)
        store = _open_store(config)
        daemon: Daemon | None = None
        try:
            daemon = Daemon(config, store, tls, tokens)
            daemon.start_up()
            if not store.has_ballast:
                log.warning("store_reserve_missing", reserve_size=config.reserve_size)
            sockets = Sockets(local, peer_sockets, client_sockets, http_sockets, ping_sockets)
            await daemon.run(
                sockets, install_signal_handlers=install_signal_handlers, task_status=task_status
            )
        finally:
            if daemon is not None:
                daemon.writer.close()
            store.close()
    finally:
        for sock in bound:
            sock.close()
        if local is not None:
            local.close()
            assert config.unix_socket is not None
            remove_socket(config.unix_socket)


def _open_store(config: Config) -> Store:
    """The store in the data directory.

    Raises:
        StartupError: it cannot be opened.
    """
    try:
        return Store(
            config.data_dir,
            initial_map_size=config.initial_map_size,
            max_map_size=config.max_map_size,
            reserve_size=config.reserve_size,
        )
    except (storage.SchemaMismatch, storage.StoreCorrupt) as exc:
        msg = f"cannot use the store in {config.data_dir}: {exc}"
        raise StoreUnusable(msg) from exc
    except Exception as exc:
        msg = f"cannot open the store in {config.data_dir}: {exc}"
        raise StartupError(msg) from exc


def _address(sock: trio.socket.SocketType) -> str:
    return socket_address_text(sock.getsockname())


async def _watch_signals(
    stop: Callable[[], object], log: structlog.typing.FilteringBoundLogger
) -> None:
    # SIGHUP too: a daemon whose terminal closes stops as cleanly as on SIGTERM.
    with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT, signal.SIGHUP) as signals:
        async for signum in signals:
            log.info("shutdown_requested", signal=signal.Signals(signum).name)
            stop()
            return


async def _run_all(
    tasks: Iterable[Callable[[], Awaitable[None]]],
    *,
    task_status: trio.TaskStatus[trio.CancelScope] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Run ``tasks`` until cancelled; ``task_status.started`` receives the scope
    that cancels them."""
    async with trio.open_nursery() as nursery:
        for task in tasks:
            nursery.start_soon(task)
        task_status.started(nursery.cancel_scope)
