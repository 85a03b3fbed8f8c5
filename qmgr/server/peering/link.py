"""The link to one next hop: connect when there is work, back off when it fails.

Theory of operation
-------------------
Every outgoing queue whose messages go through the same next hop (the
destination queue manager itself, or the router ``[routes]`` names) shares
one :class:`Link`, and so one TCP session. The link's task sleeps while
none of its queues has work; then it connects (``peers.connect_timeout``),
runs a :class:`~qmgr.server.peering.connection.PeerConnection` as initiator
(over mutual TLS when it is on: ``tls.peer_handshake``) until the
connection ends, and tells every queue that what it sent and saw
unacknowledged must be sent again. A failed attempt, or a session that
never opened, waits ``peers.retry_initial`` seconds, doubling up to
``peers.retry_max``; a session that opened resets the delay.
"""

from __future__ import annotations

from collections.abc import Callable

import trio

from qmgr.protocol import Role

from ..tls import TlsFailed
from .connection import ConnectionContext, PeerConnection, secure
from .outgoing_queue import OutgoingQueue

__all__ = ["Link"]


class Link:
    """Delivery to one next hop ``(host, port)``.

    Args:
        context: what its connections need (and the ``peers`` settings: connect
            timeout, retry delays).
        hop: the next hop.
        wall: unix time (the next attempt's, for status).
    """

    def __init__(
        self, context: ConnectionContext, hop: tuple[str, int], wall: Callable[[], float]
    ) -> None:
        self.context = context
        self.wall = wall
        self.hop = hop
        self.queues: list[OutgoingQueue] = []
        self.connection: PeerConnection | None = None
        self.state = "idle"
        self.next_attempt: float | None = None
        self.failures = 0
        self.last_error = ""
        self._wake = trio.Event()
        host, port = hop
        self.name = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
        self.log = context.parts.log.bind(peer=self.name)

    def wake(self) -> None:
        """Its queues may have work."""
        self._wake.set()
        if self.connection is not None:
            self.connection.wake()

    def has_work(self) -> bool:
        """Whether any of its queues needs the connection."""
        return any(queue.has_work() for queue in self.queues)

    def describe(self) -> tuple[str, float | None, str]:
        """State, the next attempt's unix time (while waiting) and the last error."""
        connection = self.connection
        if connection is not None:
            state = "connected" if connection.opened.is_set() else "connecting"
            return state, None, self.last_error
        return self.state, self.next_attempt, self.last_error

    async def run(self) -> None:
        """Deliver until cancelled."""
        config = self.context.parts.config
        host, port = self.hop
        while True:
            while not self.has_work():
                self.state = "idle"
                self._wake = trio.Event()
                await self._wake.wait()
            self.state = "connecting"
            self.next_attempt = None
            try:
                with trio.fail_after(config.peer_connect_timeout):
                    stream = await trio.open_tcp_stream(host, port)
            except (OSError, trio.TooSlowError) as exc:
                reason = "timed out" if isinstance(exc, trio.TooSlowError) else str(exc)
                await self._back_off(f"cannot connect: {reason}")
                continue
            try:
                session_stream, identity = await secure(stream, self.context, server_side=False)
            except TlsFailed as exc:
                with trio.CancelScope(shield=True):
                    await stream.aclose()
                await self._back_off(str(exc))
                continue
            connection = PeerConnection(
                self.context,
                session_stream,
                role=Role.INITIATOR,
                peer=self.name,
                queues=self.queues,
                identity=identity,
            )
            self.connection = connection
            try:
                await connection.run()
            finally:
                self.connection = None
                for queue in self.queues:
                    queue.machine.connection_lost()
            if connection.opened.is_set():
                # The session worked (its end is logged as peer_session_closed):
                # reconnect after the shortest delay if there is still work.
                self.failures = 0
                self.last_error = connection.close_reason
                if not self.has_work():
                    continue
                await self._back_off(connection.close_reason, failed=False)
                continue
            await self._back_off(connection.close_reason or "the session ended")

    async def _back_off(self, reason: str, *, failed: bool = True) -> None:
        config = self.context.parts.config
        delay = min(config.peer_retry_max, config.peer_retry_initial * 2**self.failures)
        self.failures += 1
        self.last_error = reason
        self.state = "waiting"
        self.next_attempt = self.wall() + delay
        if failed:
            self.log.warning("peer_connect_failed", reason=reason, retry_in=round(delay, 3))
        await trio.sleep(delay)
        self.next_attempt = None
