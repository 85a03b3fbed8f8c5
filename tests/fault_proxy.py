"""A fault-injecting TCP proxy for the peering tests (a plain port map when no fault is set).

Theory of operation
-------------------
:class:`FaultProxy` listens on a free loopback port and forwards every
connection it accepts to one target (a queue manager's peer port), byte for
byte, both ways. A queue manager is pointed at it with a route::

    --set 'routes."127.0.0.1:<target port>"="127.0.0.1:<proxy port>"'

One background thread runs everything with ``selectors``: the listener, and
for each connection two *pipes* (client -> target, target -> client). A pipe
reads a chunk (up to :data:`CHUNK` bytes) into its queue, stamped with the
time it may leave (now + the current delay), and writes queued chunks in
order once due. A pipe stops reading while its queue holds more than
``max_buffer`` bytes, so a slow side pushes back through the proxy as it
would through a router. When either side closes or fails, what is queued
towards the other side is dropped and both sockets are closed: after a
fault, neither side can tell how much of its last writes arrived.

Faults, set from any thread and acted on at once (a socketpair wakes the
loop):

* :meth:`FaultProxy.cut` closes every connection, with a FIN or a RST; with
  ``mid_frame=True`` it first waits (up to ``wait`` seconds) for a pipe to
  hold at least two bytes — the chunk it just read, or data held by a stall
  or a delay — forwards a random prefix of them (at least one byte, never
  all) and then cuts, so the receiver is left with a packet begun and never
  finished (unless the prefix happens to end on a packet boundary);
* :meth:`FaultProxy.stall` stops all reading and writing for N seconds;
* :meth:`FaultProxy.set_delay` holds every chunk for N seconds before it is
  forwarded (order kept);
* :meth:`FaultProxy.refuse` resets every new connection for N seconds
  (existing ones go on);
* :meth:`FaultProxy.shape` limits each pipe to a rate (bytes/s: a chunk
  leaves once the ones before it would have passed at that rate) and holds
  a share of the chunks (the "lost" ones) a retransmission time longer, as
  TCP delivers after losing a segment; order is kept either way;
* :meth:`FaultProxy.heal` ends stall, delay, shaping and refusal.

The proxy's random choices (the length of a mid-frame prefix, which chunks
are lost) come from ``random.Random(seed)``; ``fault_schedule.FaultSchedule``
draws the kind and moment of each fault from its own seeded generator (and
``tests/fleet`` shapes the links between sites of queue managers with
:meth:`FaultProxy.shape`). Thread scheduling still
decides which bytes are in flight when a fault lands, so a run is
reproducible in its decisions, not byte for byte.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import random
import selectors
import socket
import struct
import threading
import time
from typing import Final, Self

from helpers import route_args

__all__ = ["CHUNK", "CutReport", "FaultProxy", "ProxyStats"]

#: Bytes read from a socket at a time.
CHUNK: Final = 65536
#: Longest the loop sleeps when nothing is due (it also wakes on any event).
_IDLE_WAIT: Final = 0.05
#: How long accepting a connection may wait for the target to accept.
_CONNECT_TIMEOUT: Final = 2.0
#: SO_LINGER on, timeout 0: close() sends a RST and drops unsent data.
_LINGER_RESET: Final = struct.pack("ii", 1, 0)


@dataclasses.dataclass(frozen=True, slots=True)
class CutReport:
    """What one :meth:`FaultProxy.cut` did.

    Attributes:
        connections: connections closed.
        partial: bytes forwarded of the chunk cut mid-frame (0: a clean cut).
        held: bytes that were queued on that pipe when it was cut.
    """

    connections: int
    partial: int = 0
    held: int = 0


@dataclasses.dataclass(slots=True)
class ProxyStats:
    """Counters since the proxy started (read them with :meth:`FaultProxy.snapshot`)."""

    accepted: int = 0
    refused: int = 0
    upstream_failures: int = 0
    cuts: int = 0
    connections_cut: int = 0
    mid_frame_cuts: int = 0
    stalls: int = 0
    delays: int = 0
    bytes_forwarded: int = 0


@dataclasses.dataclass(eq=False, slots=True)
class _Pipe:
    """One direction of a connection: bytes read from ``src``, queued, written to ``dst``."""

    src: socket.socket
    dst: socket.socket
    queue: collections.deque[tuple[float, memoryview]] = dataclasses.field(
        default_factory=collections.deque
    )
    queued: int = 0
    #: When the last chunk queued leaves (shaping keeps them in order behind it).
    last_due: float = 0.0

    def push(self, due: float, data: bytes) -> None:
        self.queue.append((due, memoryview(data)))
        self.queued += len(data)


@dataclasses.dataclass(eq=False, slots=True)
class _Connection:
    client: socket.socket
    upstream: socket.socket
    pipes: tuple[_Pipe, _Pipe]


@dataclasses.dataclass(eq=False, slots=True)
class _CutCommand:
    mid_frame: bool
    reset: bool
    deadline: float
    done: threading.Event = dataclasses.field(default_factory=threading.Event)
    report: CutReport | None = None


class FaultProxy:
    """A TCP proxy on 127.0.0.1 that forwards to ``target_port`` and injects faults.

    Args:
        target_port: the port connections are forwarded to.
        seed: seeds the proxy's own random choices.
        target_host: the host connections are forwarded to.
        max_buffer: bytes a pipe may hold before it stops reading.
        listen_host, listen_port: where the proxy listens (port 0: a free one).
    """

    def __init__(
        self,
        target_port: int,
        *,
        seed: int = 0,
        target_host: str = "127.0.0.1",
        max_buffer: int = 1 << 20,
        listen_host: str = "127.0.0.1",
        listen_port: int = 0,
    ) -> None:
        self.target = (target_host, target_port)
        self.max_buffer = max_buffer
        self.listen_host = listen_host
        self._rng = random.Random(seed)
        self._listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._listener.bind((listen_host, listen_port))
        self._listener.listen(128)
        self._listener.setblocking(False)
        self.port: int = self._listener.getsockname()[1]
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._wake_w.setblocking(False)
        self._selector = selectors.DefaultSelector()
        self._lock = threading.Lock()
        self._stats = ProxyStats()
        self._connections: list[_Connection] = []
        self._cuts: list[_CutCommand] = []
        self._armed: _CutCommand | None = None
        self._stalled_until = 0.0
        self._refuse_until = 0.0
        self._delay = 0.0
        self._rate: float | None = None
        self._loss = 0.0
        self._retransmit = 0.0
        self._closing = False
        self._thread = threading.Thread(target=self._run, name=f"fault-proxy-{self.port}")
        self._error: BaseException | None = None

    # ------------------------------------------------------------------ life cycle

    @property
    def address(self) -> str:
        """``HOST:PORT`` of the proxy's listener."""
        return f"{self.listen_host}:{self.port}"

    def route_args(self, destination_port: int | None = None) -> list[str]:
        """The ``--set`` arguments that send a queue manager's traffic for
        ``127.0.0.1:destination_port`` (default: the target) through this proxy."""
        port = self.target[1] if destination_port is None else destination_port
        return route_args(port, self.port)

    def start(self) -> Self:
        """Start forwarding in a background thread."""
        self._thread.start()
        return self

    def close(self) -> None:
        """Stop the thread and close every socket."""
        with self._lock:
            self._closing = True
        self._wake()
        if self._thread.is_alive():
            self._thread.join(10.0)
        self._wake_r.close()
        self._wake_w.close()
        if self._error is not None:
            raise AssertionError(f"the fault proxy failed: {self._error!r}") from self._error

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # ------------------------------------------------------------------ controls

    def cut(self, *, mid_frame: bool = False, reset: bool = False, wait: float = 1.0) -> CutReport:
        """Close every connection now and return what was cut.

        Args:
            mid_frame: first forward a random part (never all) of a chunk in
                flight, waiting up to ``wait`` seconds for one; with none, the
                cut is clean.
            reset: close with a RST (unsent data dropped) instead of a FIN.
            wait: see ``mid_frame``.
        """
        command = _CutCommand(mid_frame, reset, time.monotonic() + (wait if mid_frame else 0.0))
        with self._lock:
            self._cuts.append(command)
        self._wake()
        if not command.done.wait(wait + 10.0):
            raise AssertionError("the fault proxy did not carry out a cut")
        assert command.report is not None
        return command.report

    def stall(self, seconds: float) -> None:
        """Forward nothing either way for ``seconds`` (bytes wait in the proxy and the kernel)."""
        with self._lock:
            self._stalled_until = max(self._stalled_until, time.monotonic() + seconds)
            self._stats.stalls += 1
        self._wake()

    def set_delay(self, seconds: float) -> None:
        """Hold each chunk read from now on for ``seconds`` before forwarding it (0: off)."""
        with self._lock:
            self._delay = max(0.0, seconds)
            if seconds > 0:
                self._stats.delays += 1
        self._wake()

    def refuse(self, seconds: float) -> None:
        """Reset every new connection for ``seconds``."""
        with self._lock:
            self._refuse_until = max(self._refuse_until, time.monotonic() + seconds)
        self._wake()

    def shape(
        self, *, rate: float | None = None, loss: float = 0.0, retransmit: float = 0.2
    ) -> None:
        """From now on, forward each direction of a connection at ``rate`` bytes/s at most
        (None: as fast as it comes), and hold each chunk with probability ``loss``
        ``retransmit`` seconds longer, as TCP delivers after a lost segment (order kept)."""
        with self._lock:
            self._rate, self._loss, self._retransmit = rate, loss, retransmit
        self._wake()

    def heal(self) -> None:
        """End any stall, delay, shaping or refusal."""
        with self._lock:
            self._stalled_until = 0.0
            self._refuse_until = 0.0
            self._delay = 0.0
            self._rate, self._loss = None, 0.0
        self._wake()

    def snapshot(self) -> ProxyStats:
        """A copy of the counters."""
        with self._lock:
            return dataclasses.replace(self._stats)

    @property
    def open_connections(self) -> int:
        """Connections being forwarded right now."""
        with self._lock:
            return len(self._connections)

    def _wake(self) -> None:
        with contextlib.suppress(OSError):
            self._wake_w.send(b"x")

    # ------------------------------------------------------------------ the loop

    def _run(self) -> None:
        selector = self._selector
        selector.register(self._listener, selectors.EVENT_READ, None)
        selector.register(self._wake_r, selectors.EVENT_READ, None)
        try:
            while True:
                with self._lock:
                    closing = self._closing
                    commands, self._cuts = self._cuts, []
                if closing:
                    break
                for command in commands:
                    self._arm(command)
                now = time.monotonic()
                self._register(now)
                for key, _mask in selector.select(self._timeout(now)):
                    sock = key.fileobj
                    if sock is self._wake_r:
                        with contextlib.suppress(BlockingIOError):
                            self._wake_r.recv(4096)
                    elif sock is self._listener:
                        self._accept()
                    else:
                        assert isinstance(key.data, _Pipe)
                        self._read(key.data)
                self._finish_cuts()
                self._write_due()
        except BaseException as exc:  # reported by close()
            self._error = exc
        finally:
            for connection in list(self._connections):
                self._drop(connection, reset=True)
            selector.close()
            self._listener.close()

    def _arm(self, command: _CutCommand) -> None:
        """Start a cut: :meth:`_finish_cuts` carries it out."""
        if self._armed is not None:  # one cut at a time: finish the older one now
            self._complete(self._armed, self._cut_all(self._armed.reset))
        self._armed = command

    def _timeout(self, now: float) -> float:
        wait = _IDLE_WAIT
        if self._stalled_until > now:
            wait = min(wait, self._stalled_until - now)
        for connection in self._connections:
            for pipe in connection.pipes:
                if pipe.queue:
                    wait = min(wait, max(0.0, pipe.queue[0][0] - now))
        if self._armed is not None:
            wait = min(wait, max(0.0, self._armed.deadline - now))
        return wait

    def _register(self, now: float) -> None:
        """Read from a socket unless stalled or its pipe is full."""
        stalled = self._stalled_until > now
        for connection in self._connections:
            for pipe in connection.pipes:
                want = not stalled and pipe.queued < self.max_buffer
                registered = pipe.src in self._selector.get_map()
                if want and not registered:
                    self._selector.register(pipe.src, selectors.EVENT_READ, pipe)
                elif not want and registered:
                    self._selector.unregister(pipe.src)

    def _accept(self) -> None:
        try:
            client, _ = self._listener.accept()
        except (BlockingIOError, InterruptedError):
            return
        now = time.monotonic()
        with self._lock:
            refusing = self._refuse_until > now
            if refusing:
                self._stats.refused += 1
        if refusing:
            _close(client, reset=True)
            return
        try:
            upstream = socket.create_connection(self.target, timeout=_CONNECT_TIMEOUT)
        except OSError:
            with self._lock:
                self._stats.upstream_failures += 1
            _close(client, reset=True)
            return
        for sock in (client, upstream):
            sock.setblocking(False)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        connection = _Connection(
            client, upstream, (_Pipe(client, upstream), _Pipe(upstream, client))
        )
        with self._lock:
            self._connections.append(connection)
            self._stats.accepted += 1

    def _find(self, pipe: _Pipe) -> _Connection | None:
        for connection in self._connections:
            if pipe in connection.pipes:
                return connection
        return None

    def _read(self, pipe: _Pipe) -> None:
        connection = self._find(pipe)
        if connection is None:
            return
        try:
            data = pipe.src.recv(CHUNK)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            self._drop(connection, reset=True)
            return
        if not data:
            # One side closed: forward what is queued towards the other side, then close both.
            self._flush(pipe)
            self._drop(connection, reset=False)
            return
        with self._lock:
            delay, rate, loss, retransmit = self._delay, self._rate, self._loss, self._retransmit
        due = time.monotonic() + delay
        if loss and self._rng.random() < loss:
            due += retransmit
        if rate:
            due = max(due, pipe.last_due) + len(data) / rate
        pipe.last_due = due = max(due, pipe.last_due)
        pipe.push(due, data)

    def _flush(self, pipe: _Pipe) -> None:
        """Best effort: write whatever ``pipe`` holds now (the other side closed)."""
        while pipe.queue:
            _, view = pipe.queue.popleft()
            with contextlib.suppress(OSError):
                pipe.dst.send(view)
        pipe.queued = 0

    def _write_due(self) -> None:
        now = time.monotonic()
        if self._stalled_until > now:
            return
        for connection in list(self._connections):
            for pipe in connection.pipes:
                while pipe.queue and pipe.queue[0][0] <= now:
                    due, view = pipe.queue[0]
                    try:
                        sent = pipe.dst.send(view)
                    except (BlockingIOError, InterruptedError):
                        break
                    except OSError:
                        self._drop(connection, reset=True)
                        break
                    pipe.queued -= sent
                    with self._lock:
                        self._stats.bytes_forwarded += sent
                    if sent < len(view):
                        pipe.queue[0] = (due, view[sent:])
                        break
                    pipe.queue.popleft()
                if connection not in self._connections:
                    break

    def _finish_cuts(self) -> None:
        command = self._armed
        if command is None:
            return
        if command.mid_frame:
            for connection in self._connections:
                for pipe in connection.pipes:
                    if pipe.queued >= 2:
                        report = self._cut_mid_frame(pipe, command.reset)
                        self._complete(command, report)
                        return
            if time.monotonic() < command.deadline:
                return
        self._complete(command, self._cut_all(command.reset))

    def _cut_mid_frame(self, pipe: _Pipe, reset: bool) -> CutReport:
        held = pipe.queued
        data = b"".join(bytes(view) for _, view in pipe.queue)
        part = self._rng.randint(1, held - 1)
        pipe.dst.setblocking(True)
        pipe.dst.settimeout(1.0)
        try:
            pipe.dst.sendall(data[:part])
        except OSError:
            part = 0  # the other side was gone already: a clean cut after all
        with self._lock:
            self._stats.bytes_forwarded += part
            if part:
                self._stats.mid_frame_cuts += 1
        report = self._cut_all(reset)
        return dataclasses.replace(report, partial=part, held=held)

    def _cut_all(self, reset: bool) -> CutReport:
        count = len(self._connections)
        for connection in list(self._connections):
            self._drop(connection, reset=reset)
        with self._lock:
            self._stats.cuts += 1
            self._stats.connections_cut += count
        return CutReport(connections=count)

    def _complete(self, command: _CutCommand, report: CutReport) -> None:
        command.report = report
        if self._armed is command:
            self._armed = None
        command.done.set()

    def _drop(self, connection: _Connection, *, reset: bool) -> None:
        with self._lock:
            if connection not in self._connections:
                return
            self._connections.remove(connection)
        for pipe in connection.pipes:
            pipe.queue.clear()
            pipe.queued = 0
            if pipe.src in self._selector.get_map():
                self._selector.unregister(pipe.src)
        _close(connection.client, reset=reset)
        _close(connection.upstream, reset=reset)


def _close(sock: socket.socket, *, reset: bool) -> None:
    with contextlib.suppress(OSError):
        if reset:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, _LINGER_RESET)
        else:
            sock.shutdown(socket.SHUT_RDWR)
    sock.close()
