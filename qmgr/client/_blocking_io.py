"""The blocking client's I/O: a socket (plain or TLS) driving a ``ClientProtocol``.

Theory of operation
-------------------
A :class:`SocketConnection` owns one TCP (``TCP_NODELAY``) or Unix-domain
connection to the daemon's client listener, and a ``_protocol.ClientProtocol``
that does all but the I/O: it checks arguments, packs requests, allocates
request and transaction ids, routes replies and keeps the pipelining's books.
Every request appends one frame to the protocol's output buffer (a call's
frame is appended by :meth:`SocketConnection.exchange`); the connection
writes the buffer and reads (in reads of up to 1 MiB), feeding the protocol,
until the reply with its request id arrives. Replies carry request ids, so
replies to *pipelined* requests may be interleaved with the one being
waited for. :meth:`SocketConnection.run` drives a call (``calls/``): it
exchanges each request the call yields and sends the call the reply, or
throws it the error.

Two requests are pipelined: ``QueueManager.begin`` (the client chooses
the transaction id) and ``Transaction.send``. They only append their
frame to the output buffer and return. The buffer is written once it holds
more than ``PIPELINE_FLUSH_BYTES`` (16 KiB), or together with the next
request that needs a reply: a one-message transaction (Begin, Send, Commit)
is one write and one round trip. Replies to pipelined requests are matched by request id; the first
failure is kept on its transaction and raised by the next call on that
transaction, and ``commit()`` of such a transaction aborts it and raises
that error. The daemon itself refuses to commit a transaction in which a
send failed, so a commit never applies part of a transaction even when the
failure and the commit cross on the wire.

Writes never deadlock against the daemon's replies: when the kernel will not
take all of a large buffer at once, the client reads whatever replies are
waiting before writing on. An interrupted request (``KeyboardInterrupt``
half-way) breaks the connection: the stream can no longer be trusted.

The socket is blocking, and read and written with non-blocking flags. An
``ssl.SSLSocket`` takes no flags, so over TLS (:class:`TlsConnection`) the
socket is non-blocking and the connection waits with ``poll``: a read first
takes what the TLS layer already holds (data can be decrypted and waiting
while the kernel has nothing), and waits only when TLS asks for more bytes,
or for room to write (a renegotiation or a key update can need either).

One thread at a time. A client is not for two threads at once: they would
read each other's replies, or pack frames into the buffer the other is
writing. Every call holds the connection (:meth:`SocketConnection.take`,
from before it packs its first frame to its reply) and a second thread that
finds it held breaks the connection for both with ``ConnectionLost``.

One process. A child made by ``os.fork`` (``multiprocessing``'s default start
method on Linux) inherits the socket, and two processes on one connection
would take each other's replies, and with them messages. In the child, every
connection is broken at once (every call raises ``ConnectionLost`` saying to
connect again there) and its copy of the socket closed, which leaves the
parent's connection as it was.
"""

from __future__ import annotations

import contextlib
import os
import select
import socket
import ssl
import threading
import weakref
from collections.abc import Callable, Iterator
from typing import Concatenate, Final, ParamSpec, TypeVar

from qmgr.tcp import tune_tcp
from wire import client as cf
from wire.addresses import endpoint_text

from ._codec import SendOptions
from ._common import (
    RECEIVE_SIZE,
    UNIX_PREFIX,
    cannot_connect,
    connect_failure,
    parse_address,
    unix_path,
)
from ._exceptions import ConnectionLost, QueueError
from ._message import Message
from ._protocol import ClientProtocol, Flow, Waiter
from ._replies import message_id
from ._tls_context import tls_failure
from ._transaction import TransactionState, earlier_failure

__all__ = ["SocketConnection", "TlsConnection", "connection_for", "open_socket", "wrap_tls"]

#: The connections of this process (see the module docstring on fork).
_OPEN: weakref.WeakSet[SocketConnection] = weakref.WeakSet()


def _break_in_child() -> None:
    """Called in a child made by ``os.fork``: break the connections it inherited."""
    parent = os.getppid()
    for connection in list(_OPEN):
        connection.forked(parent)


P = ParamSpec("P")
T = TypeVar("T")

_MSG_DONTWAIT: Final = getattr(socket, "MSG_DONTWAIT", 0)
_CONN_ERRORS = (OSError, EOFError)


def open_socket(address: str, timeout: float | None) -> tuple[socket.socket, str, str]:
    """A connected socket to ``address`` (``HOST:PORT`` or ``unix:PATH``), with
    the host name TLS checks and the address for messages.

    Raises:
        ValueError: a bad address. ConnectionLost: nothing answers there.
    """
    path = unix_path(address)
    if path is not None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(timeout)
        try:
            sock.connect(path)
        except OSError as exc:
            sock.close()
            raise cannot_connect(address, connect_failure(exc)) from None
        return sock, "localhost", f"{UNIX_PREFIX}{path}"
    host, port = parse_address(address)
    where = endpoint_text(host, port)
    try:
        sock = socket.create_connection((host, port), timeout=timeout)
    except TimeoutError:
        raise cannot_connect(where, f"no answer within {timeout} s") from None
    except OSError as exc:
        raise cannot_connect(where, connect_failure(exc)) from None
    tune_tcp(sock)
    return sock, host, where


def wrap_tls(sock: socket.socket, context: ssl.SSLContext, host: str, where: str) -> ssl.SSLSocket:
    """``sock`` after the TLS handshake (under its timeout), made non-blocking for
    :class:`TlsConnection`.

    Raises:
        ConnectionLost: the handshake failed (an untrusted certificate, ...).
    """
    try:
        secure = context.wrap_socket(sock, server_hostname=host)
    except (OSError, ssl.SSLError) as exc:
        raise cannot_connect(where, tls_failure(exc, str(exc))) from None
    secure.setblocking(False)
    return secure


def connection_for(sock: socket.socket, address: str) -> SocketConnection:
    """The connection over ``sock``: a :class:`TlsConnection` for an ``ssl.SSLSocket``."""
    if isinstance(sock, ssl.SSLSocket):
        return TlsConnection(sock, address)
    return SocketConnection(sock, address)


class SocketConnection:
    """One connection to the daemon over a blocking socket (see the module docstring).

    Attributes:
        address: the ``HOST:PORT`` (or ``unix:PATH``) connected to.
        sock: the socket.
        proto: the connection's protocol state.
    """

    def __init__(self, sock: socket.socket, address: str) -> None:
        self.address = address
        self.sock = sock
        self.proto = ClientProtocol(address, Waiter, address_in_stream_errors=False)
        self._recv_buffer = bytearray(RECEIVE_SIZE)
        self._recv_view = memoryview(self._recv_buffer)
        # Held by the thread whose call packs, writes or waits (``take``): a
        # second thread that finds it held uses the connection at the same time.
        self._exchanging = threading.Lock()
        self._owner: int | None = None
        _OPEN.add(self)

    def limit_waits(self, timeout: float | None) -> None:
        """Bound every wait of the socket by ``timeout`` seconds (None: no bound)."""
        self.sock.settimeout(timeout)

    def forked(self, parent: int) -> None:
        """This is a child of process ``parent``, made by ``os.fork``: the connection is
        the parent's. Break it here and close this process's copy of the socket (a
        close, not a shutdown, which would end the parent's connection too)."""
        self._exchanging = threading.Lock()  # another thread may have held it at the fork
        self._owner = None
        self.proto.fail(
            f"the connection was made by process {parent}, and this process was forked "
            "from it: connect again in this process"
        )
        self.sock.close()

    def close(self) -> None:
        """Close: later calls raise ConnectionLost; the daemon aborts open transactions.

        A call waiting in another thread (a receive with no timeout) wakes with
        ConnectionLost: the socket is shut down first, which ends its wait and
        tells the daemon at once (a closed socket a thread still waits on stays
        open in the kernel, and the daemon would hand that receive a message)."""
        self.proto.close(f"the connection to {self.address} was closed")
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)
        self.sock.close()

    # ------------------------------------------------------------------
    # Calls and the hot paths
    # ------------------------------------------------------------------

    def run(
        self,
        call: Callable[Concatenate[ClientProtocol[Waiter], P], Flow[Waiter, T]],
        *args: P.args,
        **kwargs: P.kwargs,
    ) -> T:
        """Carry out ``call(proto, *args, **kwargs)``: exchange each request it
        yields, send it the reply or throw it the error; return its result."""
        taken = self.take()
        try:
            flow = call(self.proto, *args, **kwargs)
            try:
                waiter, frame = next(flow)
                while True:
                    try:
                        reply = self.exchange(waiter, frame)
                    except BaseException as exc:
                        waiter, frame = flow.throw(exc)
                    else:
                        waiter, frame = flow.send(reply)
            except StopIteration as done:
                result: T = done.value
                return result
        finally:
            self.give(taken)

    def send(
        self,
        destination: str,
        body: bytes | bytearray | memoryview | str,
        transactional: bool | None,
        options: SendOptions,
    ) -> str:
        """A send outside any transaction: its message id."""
        taken = self.take()
        try:
            proto = self.proto
            waiter = proto.send_request(proto.out, destination, body, transactional, options)
            return message_id(self.exchange(waiter))
        finally:
            self.give(taken)

    def receive(
        self,
        state: TransactionState | None,
        queue: str,
        timeout: float | None,
        peek: bool,
        lookup_id: int | None,
    ) -> Message | None:
        """Receive or peek, in the transaction ``state`` or outside any."""
        taken = self.take()
        try:
            proto = self.proto
            waiter = proto.receive_request(proto.out, state, queue, timeout, peek, lookup_id)
            try:
                reply = self.exchange(waiter)
            except QueueError as exc:
                earlier_failure(state, exc)
                raise
            return proto.receive_result(reply, state)
        finally:
            self.give(taken)

    # ------------------------------------------------------------------
    # Bytes out, bytes in
    # ------------------------------------------------------------------

    def take(self) -> bool:
        """Hold the connection for this thread's call; False if this thread holds
        it already (a call made inside another, such as ``run``'s exchanges).

        Raises:
            ConnectionLost: another thread holds it: the two would read each
                other's replies (a message taken and dropped, a wait that never
                ends), so the connection is broken for both, loudly.
        """
        me = threading.get_ident()
        if self._owner == me:
            return False
        if not self._exchanging.acquire(blocking=False):
            raise self._break_shared()
        self._owner = me
        return True

    def give(self, taken: bool) -> None:
        """Let go of the connection if :meth:`take` took it (``taken``)."""
        if taken:
            self._owner = None
            self._exchanging.release()

    @contextlib.contextmanager
    def held(self) -> Iterator[None]:
        """:meth:`take` for a block (requests packed outside a call: a begin,
        a transaction's pipelined sends, a page asked for ahead)."""
        taken = self.take()
        try:
            yield
        finally:
            self.give(taken)

    def exchange(self, waiter: Waiter, frame: bytes | bytearray = b"") -> cf.ServerReply:
        """Write the buffer (and ``frame`` after it) and wait for ``waiter``'s reply;
        raise error replies."""
        taken = self.take()
        try:
            self._flush(frame)
            while waiter.reply is None:
                self._read(block=True)
        except QueueError:
            if waiter.reply is None:
                raise
            # The reply came, and in the same read the daemon's notice that it
            # closed the connection (it was stopping): the request was answered.
        except BaseException as exc:
            # Interrupted half-way (KeyboardInterrupt, ...): the stream can no longer be trusted.
            self._break(f"a request was interrupted ({type(exc).__name__})")
            raise
        finally:
            self.give(taken)
        return self.proto.result(waiter)

    def write(self) -> None:
        """Write the buffer (pipelined requests); an interrupted write breaks the connection."""
        taken = self.take()
        try:
            self._flush()
        except QueueError:
            raise
        except BaseException as exc:
            self._break(f"a write was interrupted ({type(exc).__name__})")
            raise
        finally:
            self.give(taken)

    def _flush(self, frame: bytes | bytearray = b"") -> None:
        """Write the whole output buffer and ``frame``, reading replies whenever the
        kernel is full (the buffer taken whole, ``data_to_send``, as the trio
        connection takes it)."""
        out = self.proto.data_to_send(frame)
        if not out:
            return
        sock = self.sock
        try:
            sent = sock.send(out, _MSG_DONTWAIT)
        except BlockingIOError:
            sent = 0
        except _CONN_ERRORS as exc:
            raise self._write_failed(exc) from None
        if sent == len(out):
            return
        poller = select.poll()
        poller.register(sock, select.POLLIN | select.POLLOUT)
        with memoryview(out) as view:
            while sent < len(view):
                try:
                    events = poller.poll()
                    if any(event & select.POLLIN for _, event in events):
                        self._read(block=False)
                    sent += sock.send(view[sent:], _MSG_DONTWAIT)
                except BlockingIOError:
                    continue
                except _CONN_ERRORS as exc:
                    raise self._write_failed(exc) from None

    def _read(self, *, block: bool) -> None:
        """Read what the daemon sent and dispatch every whole frame."""
        try:
            if block:
                count = self.sock.recv_into(self._recv_buffer)
            else:
                count = self.sock.recv_into(self._recv_buffer, 0, _MSG_DONTWAIT)
        except BlockingIOError:
            return
        except _CONN_ERRORS as exc:
            raise self._lost(exc) from None
        self._dispatch(count)

    def _dispatch(self, count: int) -> None:
        """Hand the ``count`` bytes read into the buffer to the protocol (0: closed)."""
        if not count:
            raise self._lost(None)
        try:
            self.proto.receive_data(self._recv_view[:count])
        except QueueError:
            # A malformed frame, or the daemon refused or closed the connection (its
            # notice for request id 0): the core broke the connection.
            self.sock.close()
            raise

    def _write_failed(self, exc: BaseException) -> QueueError:
        """A write failed (the daemon closed the connection): what the daemon said
        before it closed it, still in the kernel's buffer (why: it was stopping, the
        connection was idle too long, ...), else that the connection was lost."""
        try:
            self._read(block=False)
        except QueueError as said:
            return said
        return self._lost(exc)

    def _lost(self, exc: BaseException | None) -> ConnectionLost:
        reason = "the queue manager closed the connection"
        if exc is not None:
            detail = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
            reason = f"the connection failed: {detail.lower() or type(exc).__name__}"
        error = self.proto.lost(reason)
        self.sock.close()
        return error

    def _break(self, message: str) -> ConnectionLost:
        error = self.proto.fail(message)
        self.sock.close()
        return error

    def _break_shared(self) -> ConnectionLost:
        """End a connection two threads use at once (the one waiting wakes too)."""
        error = self.proto.fail(
            "the client was used from two threads at once, which it does not allow: "
            "use one QueueManager per thread"
        )
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)  # a recv blocked in the other thread returns
        self.sock.close()
        return error


class TlsConnection(SocketConnection):
    """A :class:`SocketConnection` over a non-blocking ``ssl.SSLSocket`` (see the module doc)."""

    #: Milliseconds a wait may last (None: no limit; set while connecting).
    poll_timeout_ms: int | None = None

    def limit_waits(self, timeout: float | None) -> None:
        self.poll_timeout_ms = None if timeout is None else max(1, int(timeout * 1000))

    def _wait(self, events: int) -> None:
        poller = select.poll()
        poller.register(self.sock, events)
        if not poller.poll(self.poll_timeout_ms):
            msg = f"the queue manager at {self.address} did not answer in time"
            raise self._lost(TimeoutError(msg))

    def _flush(self, frame: bytes | bytearray = b"") -> None:
        out = self.proto.data_to_send(frame)
        if not out:
            return
        sock = self.sock
        with memoryview(out) as view:
            sent = 0
            while sent < len(view):
                try:
                    sent += sock.send(view[sent:])
                except ssl.SSLWantWriteError:
                    self._wait_to_write()
                except ssl.SSLWantReadError:
                    self._wait(select.POLLIN)
                except _CONN_ERRORS as exc:
                    raise self._write_failed(exc) from None

    def _wait_to_write(self) -> None:
        """Wait for room to write, reading the replies that arrive meanwhile (the
        daemon may be blocked writing them to us)."""
        poller = select.poll()
        poller.register(self.sock, select.POLLIN | select.POLLOUT)
        events = poller.poll(self.poll_timeout_ms)
        if not events:
            msg = f"the queue manager at {self.address} did not read in time"
            raise self._lost(TimeoutError(msg))
        if any(event & select.POLLIN for _, event in events):
            self._read(block=False)

    def _read(self, *, block: bool) -> None:
        sock = self.sock
        while True:
            try:
                count = sock.recv_into(self._recv_buffer)
                break
            except ssl.SSLWantReadError:
                if not block:
                    return
                self._wait(select.POLLIN)
            except ssl.SSLWantWriteError:
                self._wait(select.POLLOUT)
            except _CONN_ERRORS as exc:
                raise self._lost(exc) from None
        self._dispatch(count)


os.register_at_fork(after_in_child=_break_in_child)
