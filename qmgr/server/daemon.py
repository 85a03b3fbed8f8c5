"""The queue-manager daemon: ``qmgr serve``.

Theory of operation
-------------------
:func:`serve` opens the store, creates the system queues on first start,
starts the committer, listens for clients, and runs until SIGTERM or SIGINT
(or until its cancel scope is cancelled by an embedding program or test).

Shutdown is ordered so that nothing half-done survives: stop accepting,
close client sessions (each aborts its open transactions; a commit already
handed to the committer finishes first, because that wait is shielded), stop
the committer once no session is left to submit to it, and close the store.
A crash skips all of this and loses nothing committed: open transactions
live only in memory and are aborted by forgetting them.

Everything that touches LMDB runs on the trio thread; see ``committer``.
"""

from __future__ import annotations

import contextlib
import errno
import itertools
import signal
import socket
import sys
import time
from collections.abc import Callable
from typing import Any

import structlog
import trio

from qmgr import __version__
from qmgr.config import Config
from qmgr.core.engine import Limits, QueueManagerCore
from qmgr.core.names import LocalIdentity
from storage import Store
from wire import client_frames as cf

from .committer import Committer
from .connection import RawConnection
from .session import ClientSession, queue_info
from .signals import QueueSignals

#: How often idle transactions are looked for, at most.
SWEEP_INTERVAL = 1.0
#: Seconds a new client connection has to send Hello before it is closed.
HELLO_TIMEOUT = 10.0


class StartupError(Exception):
    """The daemon cannot start (store unusable, port taken, ...)."""


class Daemon:
    """State shared by the sessions of one running queue manager."""

    def __init__(self, config: Config, store: Store) -> None:
        self.config = config
        self.store = store
        self.name = config.name
        identity = LocalIdentity(
            host_names=frozenset({"localhost", socket.gethostname().lower(), config.name.lower()}),
            addresses=frozenset({"127.0.0.1", "::1"}),
            peer_port=config.listen.port,
        )
        self.core = QueueManagerCore(
            store,
            identity=identity,
            limits=Limits(
                max_transaction_operations=config.tx_max_operations,
                max_transaction_bytes=config.tx_max_bytes,
            ),
        )
        self.committer = Committer(store, others_may_join=lambda: len(self.sessions) > 1)
        self.signals = QueueSignals()
        self.sessions: dict[int, ClientSession] = {}
        self.started_at = time.time()
        self.stopping = False
        self.stop_requested = trio.Event()
        #: Seconds a new connection has to send Hello.
        self.hello_timeout = HELLO_TIMEOUT
        self.log = structlog.get_logger("qmgr.daemon").bind(qm=config.name)
        self._conn_ids = itertools.count(1)

    def stop(self) -> None:
        """Begin an orderly shutdown (what SIGTERM does)."""
        self.stop_requested.set()

    def queue_infos(self) -> tuple[cf.QueueInfo, ...]:
        """Every queue with its counters."""
        return tuple(
            queue_info(q, self.core.locked_count(q.queue_id)) for q in self.core.list_queues()
        )

    def status(self) -> cf.StatusInfo:
        """Identity and health for ``qmgr status``."""
        return cf.StatusInfo(
            qm_name=self.name,
            qm_guid=self.store.qm_guid,
            server_version=__version__,
            started_at=self.started_at,
            connections=len(self.sessions),
            open_transactions=self.core.open_transactions,
            queues=self.queue_infos(),
        )

    async def handle_connection(self, stream: trio.SocketStream) -> None:
        """Serve one client connection (the listener's handler)."""
        conn_id = next(self._conn_ids)
        peer = _peer_name(stream)
        if len(self.sessions) >= self.config.max_connections or self.stopping:
            self.log.warning("connection_refused", peer=peer, reason="too many connections")
            with trio.CancelScope(shield=True):
                await stream.aclose()
            return
        connection = RawConnection(stream)
        _tune_socket(connection)
        session = ClientSession(self, connection, conn_id, peer)
        self.sessions[conn_id] = session
        try:
            await session.run()
        except Exception:
            # Last line of defence: one connection must never take the daemon down.
            self.log.exception("session_failed", conn=conn_id, peer=peer)
        finally:
            del self.sessions[conn_id]

    async def sweep_idle_transactions(self) -> None:
        """Abort transactions idle for longer than the configured timeout."""
        timeout = self.config.tx_idle_timeout
        interval = min(SWEEP_INTERVAL, max(timeout / 4, 0.05))
        while True:
            await trio.sleep(interval)
            for tx in self.core.idle_transactions(time.time(), timeout):
                owner = tx.owner
                if isinstance(owner, ClientSession):
                    owner.cancel_waits(tx.client_id)
                self.signals.notify(self.core.expire(tx, f"idle for more than {timeout:g} s"))
                self.log.info("transaction_aborted", tx=tx.client_id, reason="idle timeout")


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
        store = Store(
            config.data_dir,
            initial_map_size=config.initial_map_size,
            max_map_size=config.max_map_size,
        )
    except Exception as exc:
        msg = f"cannot open the store in {config.data_dir}: {exc}"
        raise StartupError(msg) from exc
    try:
        daemon = Daemon(config, store)
        created = daemon.core.ensure_system_queues(time.time())
        for name in created:
            log.info("system_queue_created", queue=name)
        try:
            listeners = await trio.open_tcp_listeners(
                config.client_listen.port, host=config.client_listen.host
            )
        except OSError as exc:
            reason = "address already in use" if exc.errno == errno.EADDRINUSE else exc.strerror
            msg = f"cannot listen for clients on {config.client_listen}: {reason}"
            raise StartupError(msg) from exc
        bound = listeners[0].socket.getsockname()
        async with trio.open_nursery() as inner:
            if install_signal_handlers:
                inner.start_soon(_watch_signals, daemon.stop, log)
            inner.start_soon(daemon.sweep_idle_transactions)
            inner.start_soon(trio.serve_listeners, daemon.handle_connection, listeners)
            log.info(
                "queue_manager_started",
                guid=str(store.qm_guid),
                data_dir=str(config.data_dir),
                client_listen=f"{bound[0]}:{bound[1]}",
                peer_listen=str(config.listen),
                peering="not enabled in this version",
                version=__version__,
                python=sys.version.split()[0],
            )
            task_status.started((bound[0], bound[1]))
            try:
                await daemon.stop_requested.wait()
            finally:
                daemon.stopping = True
                daemon.signals.notify_all()
                inner.cancel_scope.cancel()
        log.info("queue_manager_stopped", open_transactions_aborted=True)
    finally:
        store.close()


async def _watch_signals(
    stop: Callable[[], Any], log: structlog.typing.FilteringBoundLogger
) -> None:
    with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
        async for signum in signals:
            log.info("shutdown_requested", signal=signal.Signals(signum).name)
            stop()
            return


def _peer_name(stream: trio.SocketStream) -> str:
    try:
        host, port, *_ = stream.socket.getpeername()
    except OSError:
        return "unknown"
    return f"{host}:{port}"


def _tune_socket(stream: RawConnection) -> None:
    with contextlib.suppress(OSError):
        stream.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, True)
