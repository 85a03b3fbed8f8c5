"""A connected socket as a ``trio.abc.Stream`` that skips the scheduler when it can.

trio's ``SocketStream`` passes through the scheduler on every call, even
when the kernel could answer at once. On the commit path, where one request
and one reply frame a synced write, each pass costs as much as the Python
work around it, so :class:`RawConnection` tries the non-blocking call first
and waits with ``wait_readable``/``wait_writable`` only when the kernel says
it must. Fairness is kept by yielding after a run of reads that never had to
wait, and cancellation is checked on every read. It is an ordinary
``trio.abc.Stream``: sessions are written against that interface, and tests
drive them over ``trio.testing.memory_stream_pair``.

Under TLS the same holds: :meth:`RawConnection.start_tls` turns the socket
into a non-blocking ``ssl.SSLSocket``, and the connection goes on trying the
call first, waiting on the socket only when OpenSSL says it wants to read or
write. ``trio.SSLStream``, which copies every byte through memory BIOs and
awaits twice per call, cost a TLS commit about 90 µs of the daemon's CPU
more than a plain one.

Both ends use it: the daemon for its client connections
(``qmgr.server.client``), the trio SDK for its connection to the daemon
(``qmgr.client``). Standard library and trio only.
"""

from __future__ import annotations

import contextlib
import socket
import ssl
from collections.abc import Awaitable, Callable

import trio

#: Reads in a row that found data waiting before the connection yields anyway.
READS_BEFORE_YIELD = 16


class RawConnection(trio.abc.Stream):
    """A connected socket (TCP or Unix-domain) taken over from a ``trio.SocketStream``."""

    def __init__(self, stream: trio.SocketStream) -> None:
        self._sock: socket.socket = socket.socket(fileno=stream.socket.detach())
        self._sock.setblocking(False)
        self._ready_reads = 0
        self._closed = False
        #: The TLS layer once :meth:`start_tls` has finished (None: plain TCP).
        self.tls: ssl.SSLSocket | None = None

    async def start_tls(
        self,
        context: ssl.SSLContext,
        *,
        server_side: bool = True,
        server_hostname: str | None = None,
    ) -> None:
        """Shake hands as the TLS server (or client, checking ``server_hostname``);
        from then on every byte goes through TLS.

        Raises:
            ssl.SSLError, OSError: the handshake failed (a certificate not
                trusted, a protocol error).
            trio.BrokenResourceError: the other side closed the connection during it.
        """
        secure = context.wrap_socket(
            self._sock,
            server_side=server_side,
            server_hostname=server_hostname,
            do_handshake_on_connect=False,
        )
        self._sock = secure
        while True:
            try:
                secure.do_handshake()
            except ssl.SSLWantReadError:
                await trio.lowlevel.wait_readable(secure)
            except ssl.SSLWantWriteError:
                await trio.lowlevel.wait_writable(secure)
            except (ssl.SSLEOFError, ConnectionError) as exc:
                msg = "the connection was closed during the TLS handshake"
                raise trio.BrokenResourceError(msg) from exc
            else:
                break
        self.tls = secure

    def getpeercert(self) -> dict[str, object] | None:
        """The certificate the other side showed, decoded (None: none, or no TLS)."""
        if self.tls is None:
            return None
        return self.tls.getpeercert()  # type: ignore[return-value]

    def setsockopt(self, level: int, option: int, value: int) -> None:
        """Set a socket option (for example TCP_NODELAY)."""
        self._sock.setsockopt(level, option, value)

    def peer_name(self) -> str:
        """``host:port`` of the other end (``[v6]:port`` for IPv6, a link-local
        address's ``%scope`` inside the brackets), or ``unknown``."""
        try:
            host, port, *rest = self._sock.getpeername()
        except OSError:
            return "unknown"
        if ":" not in host:
            return f"{host}:{port}"
        scope = rest[1] if len(rest) >= 2 else 0
        if scope and "%" not in host:
            host = f"{host}%{scope}"
        return f"[{host}]:{port}"

    async def receive_some(self, max_bytes: int | None = None) -> bytes:
        """Return the bytes available (b"" at end of stream), waiting if there are none.

        Raises:
            trio.BrokenResourceError: the connection failed.
            trio.ClosedResourceError: :meth:`aclose` was called.
        """
        await trio.lowlevel.checkpoint_if_cancelled()
        self._ready_reads += 1
        if self._ready_reads >= READS_BEFORE_YIELD:
            self._ready_reads = 0
            await trio.lowlevel.cancel_shielded_checkpoint()
        size = 65536 if max_bytes is None else max_bytes
        while True:
            if self._closed:
                msg = "the connection was closed"
                raise trio.ClosedResourceError(msg)
            try:
                return self._sock.recv(size)
            except (BlockingIOError, ssl.SSLWantReadError):
                self._ready_reads = 0
                await trio.lowlevel.wait_readable(self._sock)
            except ssl.SSLWantWriteError:
                await self._wait_cross(trio.lowlevel.wait_writable)
            except ssl.SSLZeroReturnError:
                return b""  # the peer's close_notify: the end of the stream
            except OSError as exc:
                msg = f"connection broken: {exc.strerror or exc}"
                raise trio.BrokenResourceError(msg) from exc

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        """Send every byte, waiting while the kernel's buffer is full.

        Raises:
            trio.BrokenResourceError: the connection failed.
            trio.ClosedResourceError: :meth:`aclose` was called.
        """
        view = memoryview(data)
        while view:
            if self._closed:
                msg = "the connection was closed"
                raise trio.ClosedResourceError(msg)
            try:
                sent = self._sock.send(view)
            except (BlockingIOError, ssl.SSLWantWriteError):
                await trio.lowlevel.wait_writable(self._sock)
                continue
            except ssl.SSLWantReadError:
                await self._wait_cross(trio.lowlevel.wait_readable)
                continue
            except OSError as exc:
                msg = f"connection broken: {exc.strerror or exc}"
                raise trio.BrokenResourceError(msg) from exc
            view = view[sent:]

    async def wait_send_all_might_not_block(self) -> None:
        """Wait until the kernel would take more bytes."""
        await trio.lowlevel.wait_writable(self._sock)

    async def _wait_cross(self, wait: Callable[[socket.socket], Awaitable[None]]) -> None:
        """Wait for the other direction than the call's own, as OpenSSL asks of a
        read that must write or a write that must read (a TLS 1.2 renegotiation,
        which the daemon's contexts refuse): another task may be waiting there
        already, and the connection then cannot go on.

        Raises:
            trio.BrokenResourceError: another task waits on the socket that way.
        """
        try:
            await wait(self._sock)
        except trio.BusyResourceError as exc:
            msg = "the TLS session asked for a read and a write at once"
            raise trio.BrokenResourceError(msg) from exc

    async def aclose(self) -> None:
        """Close the socket (waking any task waiting on it)."""
        if not self._closed:
            self._closed = True
            trio.lowlevel.notify_closing(self._sock)
            if self.tls is not None:
                with contextlib.suppress(OSError, ValueError):
                    self.tls.unwrap()  # sends close_notify; the answer is not awaited
            self._sock.close()
        await trio.lowlevel.checkpoint()
