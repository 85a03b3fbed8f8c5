"""The trio client's I/O: a trio stream (plain or TLS) driving a ``ClientProtocol``.

Theory of operation
-------------------
One TCP connection (``TCP_NODELAY``) per client, and one
``_protocol.ClientProtocol`` that does all but the I/O, as for the blocking
client: it checks arguments, packs requests, allocates request and
transaction ids, routes replies and keeps the pipelining's books. A
background reader task (:meth:`StreamConnection.read_loop`) feeds the
daemon's stream to it, and it wakes the task waiting for each reply's
request id, so any number of tasks may share one client: a receive waiting
for a message does not hold up the others (the daemon serves a waiting
receive in a task of its own, too). Writes are serialised with a
``trio.Lock`` and never cancelled half-way (a torn frame would break the
connection for everyone), so a cancelled request either was not written at
all or was written whole; a write the daemon does not take holds its
caller at most :data:`CANCEL_REPLY_SECONDS` past the caller's deadline,
and then breaks the connection. :meth:`StreamConnection.run` drives a call
(``calls/``) as the blocking client does.

Sends inside a transaction are pipelined exactly as in the blocking client:
``AsyncTransaction.send`` appends the frame to a shared output buffer
and returns; the buffer is written once it holds more than 16 KiB or with
the next request that needs a reply. ``begin()`` is pipelined as well (the
client chooses the transaction id), so a one-message transaction costs one
round trip: Begin, Send and Commit go out in one write. The first failure
among a transaction's pipelined requests is raised by the next call on that
transaction, and ``commit()`` of such a transaction aborts it and raises
that error: the daemon refuses to commit a transaction in which a send
failed, so a commit never applies part of a transaction.

Cancelling a task that waits for a reply abandons the reply, not the
request, with one exception: a receive or peek. Cancelled while it waits,
the client sends a ``CancelReceive`` naming it (protocol version 8) and
waits, shielded, up to :data:`CANCEL_REPLY_SECONDS` for its reply. The
daemon answers the receive once: with ``NoMessage`` if it took nothing,
and the cancellation goes on; or with the message it had already taken (a
sender's write was handing it over as the cancel came), which the receive
then returns instead of raising ``Cancelled`` (trio delivers the
cancellation at the caller's next checkpoint), so that no message is taken
and lost. With a daemon older than version 8, or no reply in time, the
reply is abandoned as before: a receive outside a transaction may still
take a message, which is then lost, and inside one the transaction can only
abort (``commit()`` aborts it and raises, and the message returns to its
queue). A transaction's Prepare, Commit or Abort (a request whose waiter
``ends`` a transaction) is written even from a cancelled scope.
"""

from __future__ import annotations

import ssl
from collections.abc import Callable
from typing import Concatenate, NoReturn, ParamSpec, TypeVar

import trio

from qmgr.socket_stream import RawConnection
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
from ._exceptions import QueueError
from ._message import Message
from ._protocol import ClientProtocol, Flow, Waiter
from ._replies import message_id
from ._tls_context import tls_failure
from ._transaction import TransactionState, earlier_failure, receive_abandoned

__all__ = ["StreamConnection", "TaskWaiter", "open_stream", "tls_handshake"]

P = ParamSpec("P")
T = TypeVar("T")

_STREAM_ERRORS = (trio.BrokenResourceError, trio.ClosedResourceError, OSError)
#: How long a cancelled receive waits, shielded, for the daemon's answer to it.
CANCEL_REPLY_SECONDS = 5.0


async def open_stream(address: str) -> tuple[RawConnection, str, str]:
    """A stream to ``address`` (``HOST:PORT`` or ``unix:PATH``), the host name TLS
    checks, and the address for messages.

    Raises:
        ValueError: a bad address. ConnectionLost: nothing answers there.
    """
    path = unix_path(address)
    if path is not None:
        where = f"{UNIX_PREFIX}{path}"
        try:
            return RawConnection(await trio.open_unix_socket(path)), "localhost", where
        except OSError as exc:
            raise cannot_connect(where, connect_failure(exc)) from None
    host, port = parse_address(address)
    where = endpoint_text(host, port)
    try:
        stream = await trio.open_tcp_stream(host, port)
    except OSError as exc:
        raise cannot_connect(where, connect_failure(exc)) from None
    tune_tcp(stream)
    return RawConnection(stream), host, where


def _stream_failure(exc: BaseException) -> str:
    """Why the stream failed (a write or a read), in words."""
    return f"the connection failed: {exc}" if str(exc) else "the connection failed"


async def tls_handshake(
    stream: RawConnection, context: ssl.SSLContext, host: str, where: str
) -> RawConnection:
    """``stream`` after the TLS handshake (the same connection, now under TLS).

    Raises:
        ConnectionLost: the handshake failed (an untrusted certificate, ...);
            ``stream`` is closed.
    """
    try:
        await stream.start_tls(context, server_side=False, server_hostname=host)
    except BaseException as exc:
        if not isinstance(exc, trio.BrokenResourceError | OSError):
            with trio.CancelScope(shield=True):
                await stream.aclose()  # cancelled (a deadline of the caller's)
            raise
        cause = exc if isinstance(exc, ssl.SSLError) else exc.__cause__
        reason = tls_failure(cause, "the connection was closed")
        with trio.CancelScope(shield=True):
            await stream.aclose()
        raise cannot_connect(where, reason) from None
    return stream


class TaskWaiter(Waiter):
    """A task waiting for the reply to one request."""

    __slots__ = ("event",)

    def __init__(self, request_id: int) -> None:
        super().__init__(request_id)
        self.event = trio.Event()

    def wake(self) -> None:
        self.event.set()


class StreamConnection:
    """One connection to the daemon over a trio stream (see the module docstring).

    Attributes:
        address: the ``HOST:PORT`` (or ``unix:PATH``) connected to.
        stream: the stream.
        proto: the connection's protocol state.
    """

    def __init__(self, stream: trio.abc.Stream, address: str) -> None:
        self.address = address
        self.stream = stream
        self.proto = ClientProtocol(address, TaskWaiter, address_in_stream_errors=True)
        self._send_lock = trio.Lock()

    async def close(self, message: str) -> None:
        """Close with the reason ``message`` for later calls, and the stream, even if cancelled."""
        self.proto.close(message)
        await self._close_stream()

    # ------------------------------------------------------------------
    # Calls and the hot paths
    # ------------------------------------------------------------------

    async def run(
        self,
        call: Callable[Concatenate[ClientProtocol[TaskWaiter], P], Flow[TaskWaiter, T]],
        *args: P.args,
        **kwargs: P.kwargs,
    ) -> T:
        """Carry out ``call(proto, *args, **kwargs)``: exchange each request it
        yields, send it the reply or throw it the error; return its result."""
        flow = call(self.proto, *args, **kwargs)
        try:
            waiter, frame = next(flow)
            while True:
                try:
                    reply = await self.exchange(waiter, frame)
                except BaseException as exc:
                    waiter, frame = flow.throw(exc)
                else:
                    waiter, frame = flow.send(reply)
        except StopIteration as done:
            result: T = done.value
            return result

    async def send(
        self,
        destination: str,
        body: bytes | bytearray | memoryview | str,
        transactional: bool | None,
        options: SendOptions,
    ) -> str:
        """A send outside any transaction: its message id."""
        frame = bytearray()
        waiter = self.proto.send_request(frame, destination, body, transactional, options)
        return message_id(await self.exchange(waiter, frame))

    async def receive(
        self,
        state: TransactionState | None,
        queue: str,
        wait: float | None,
        peek: bool,
        lookup_id: int | None,
    ) -> Message | None:
        """Receive or peek, in the transaction ``state`` or not, waiting up to ``wait`` s."""
        proto = self.proto
        frame = bytearray()
        waiter = proto.receive_request(frame, state, queue, wait, peek, lookup_id)
        try:
            await self.write(frame)
            try:
                await waiter.event.wait()
            except trio.Cancelled:
                if waiter.reply is None and not await self._cancel_receive(waiter, peek):
                    if state is not None and not peek:
                        receive_abandoned(state)
                    raise
                if type(waiter.reply) is not cf.MessageReply:
                    raise  # nothing taken (or the receive failed): cancelled
                # It had taken a message: return it rather than lose it.
        finally:
            proto.forget(waiter)
        try:
            reply = proto.result(waiter)
        except QueueError as exc:
            earlier_failure(state, exc)
            raise
        return proto.receive_result(reply, state)

    async def _cancel_receive(self, waiter: TaskWaiter, peek: bool) -> bool:
        """Stop the receive of ``waiter``, whose caller was cancelled, from waiting
        on the daemon; True once its reply is in ``waiter`` (see the module docstring)."""
        frame = bytearray()
        if not self.proto.cancel_receive(frame, waiter):
            return False
        with trio.CancelScope(shield=True) as scope:
            scope.deadline = trio.current_time() + CANCEL_REPLY_SECONDS
            try:
                await self.write(frame, grace=0.0)
            except QueueError:
                return False
            if peek:
                return False  # a peek takes nothing: no reply to wait for
            await waiter.event.wait()
        return waiter.reply is not None

    # ------------------------------------------------------------------
    # Bytes out, bytes in
    # ------------------------------------------------------------------

    async def exchange(self, waiter: TaskWaiter, frame: bytearray) -> cf.ServerReply:
        """Write ``frame`` (after whatever is buffered) and wait for ``waiter``'s reply;
        a request that ends a transaction is written even in a cancelled scope."""
        try:
            if waiter.ends is not None:
                deadline = trio.current_effective_deadline()
                with trio.CancelScope(shield=True):
                    await self.write(frame, deadline=deadline)
            else:
                await self.write(frame)
            await waiter.event.wait()
        finally:
            self.proto.forget(waiter)
        return self.proto.result(waiter)

    async def write(
        self,
        frame: bytes | bytearray = b"",
        *,
        deadline: float | None = None,
        grace: float = CANCEL_REPLY_SECONDS,
    ) -> None:
        """Write the output buffer and ``frame``, whole, in request order.

        The write is not cancelled half-way, but it is bounded: one the daemon
        does not take (it reads nothing: stopped, or its host frozen) holds its
        caller until ``grace`` seconds past ``deadline`` (by default the
        caller's own; a scope cancelled without a deadline, by ``cancel()``,
        waits for the write), and then breaks the connection, since a frame
        written in part cannot be taken back: its waiters get ``ConnectionLost``.
        """
        if deadline is None:
            deadline = trio.current_effective_deadline()
        # A caller already cancelled (a shielded end of a transaction) gets the
        # grace from now.
        deadline = max(deadline, trio.current_time())
        # The turn to write is bounded the same way: a shielded caller (the end
        # of a transaction) may wait behind another task's write that the
        # daemon does not take.
        with trio.CancelScope(deadline=deadline + grace) as turn:
            await self._send_lock.acquire()
        if turn.cancelled_caught:
            await self._not_written(grace)
        try:
            data = self.proto.data_to_send(frame)
            if not data:
                return
            try:
                with trio.CancelScope(shield=True, deadline=deadline + grace) as scope:
                    await self.stream.send_all(data)
            except _STREAM_ERRORS as exc:
                error = self.proto.lost(_stream_failure(exc))
                await self._close_stream()
                raise error from None
            if scope.cancelled_caught:
                await self._not_written(grace)
        finally:
            self._send_lock.release()

    async def _not_written(self, grace: float) -> NoReturn:
        """A request could not be written by ``grace`` seconds past its caller's
        deadline: break the connection (a frame may be written in part) and raise."""
        error = self.proto.lost(
            f"a request could not be written in the {grace:g} s after its "
            "caller's deadline: the queue manager takes nothing"
        )
        await self._close_stream()
        await trio.lowlevel.checkpoint()  # the caller's cancellation, first
        raise error

    async def read_loop(self) -> None:
        """Read until the connection ends, feeding the core, which wakes each reply's waiter."""
        proto = self.proto
        reason = "the queue manager closed the connection"
        try:
            while True:
                data = await self.stream.receive_some(RECEIVE_SIZE)
                if not data:
                    break
                proto.receive_data(data)
        except QueueError:
            # A malformed stream, or the daemon refused or closed the connection (its
            # notice for request id 0): the core broke the connection and woke the
            # waiters, whose calls raise what it decided.
            return
        except trio.Cancelled:
            # Nobody reads replies any more (the client's scope is being
            # cancelled): waiters, a cancelled receive's among them, must not
            # wait for one.
            if proto.broken is None:
                proto.lost("its reader was cancelled")
            raise
        except _STREAM_ERRORS as exc:
            if proto.broken is not None:
                return  # closed (``close``): the read it cut short says nothing more
            reason = _stream_failure(exc)
        proto.lost(reason)

    async def _close_stream(self) -> None:
        """Close the socket, even in a cancelled scope."""
        with trio.CancelScope(shield=True):
            await self.stream.aclose()
