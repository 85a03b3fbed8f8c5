"""The client's protocol core: all that the blocking and the trio client share, without I/O.

Where it stands among the SDK's modules: ``qmgr.client``'s docstring.

Theory of operation
-------------------
A :class:`ClientProtocol` is the state of one connection, in the manner of
h11 or wsproto: it never touches a socket, trio or the clock. The blocking
and the trio client are adapters around it that only move bytes and wait:

* To make a request, a call asks the core for it (:meth:`~ClientProtocol.call`,
  :meth:`~ClientProtocol.send_request`, :meth:`~ClientProtocol.receive_request`,
  :meth:`~ClientProtocol.prepare_request`, :meth:`~ClientProtocol.end_request`,
  ...). The core checks and converts the arguments, takes the next request
  id, packs the frame into the buffer it is given and returns a
  :class:`Waiter` registered under that id. The blocking client's hot paths
  pass the connection's output buffer ``out``; a call packs a frame of its
  own (:data:`Pending`), which the blocking client appends to ``out`` and
  the trio client writes after ``out`` under its send lock, so that a
  request cancelled before the write never goes out.
* Two requests are *pipelined*: the daemon answers them only if they fail.
  :meth:`~ClientProtocol.begin` packs a transaction's Begin (the client
  chooses the transaction id; ``_transaction.TransactionState`` chooses the
  frames that begin, prepare and end it) and :meth:`~ClientProtocol.pipeline_send` a
  send in it; both go to ``out``, and ``pipelined`` notes the transaction of
  each request id until the transaction's Prepare, Commit or Abort is answered (the
  daemon answers in order, so any failure of them comes first).
  ``pipeline_send`` says when the adapter should write ``out``: once it holds
  over ``PIPELINE_FLUSH_BYTES`` (16 KiB), at once for a send with a time
  limit, and once the oldest send in it is over ``PIPELINE_FLUSH_AGE`` (1 s) old
  (:meth:`~ClientProtocol.flush_due`); else it goes with the next request.
* The adapter feeds every byte it reads to :meth:`~ClientProtocol.receive_data`.
  The core splits the stream into replies (``_codec.ReplyReader``): a
  pipelined request's error is recorded on its transaction (the first one
  wins, see ``_transaction.TransactionState``), every other reply is put on its
  waiter, whose :meth:`Waiter.wake` is called (the trio client sets an event
  there); a reply nobody waits for any more is dropped.
* :meth:`~ClientProtocol.result` gives the waiter's reply, or raises an
  error reply as its exception; the functions of ``_replies`` and the calls
  turn reply values into what the SDK returns.
* A framing error, the daemon's notice that it is closing the connection
  (an error reply to request id 0), a failed read or write
  (:meth:`~ClientProtocol.lost`) or :meth:`~ClientProtocol.close` break the
  connection: the buffer and the pipelined bookkeeping are dropped, every
  waiter is woken, and every later call raises :class:`ConnectionLost` with
  the reason.
* The daemon's notice is decided here, for both clients: before the
  handshake (no ``HelloOk`` yet) it is a *refusal* (too many connections,
  the daemon stopping, ...), and the connection raises the daemon's error
  itself (``LimitExceeded``, ...), which the handshake turns into "the queue
  manager at ADDRESS refused the connection: ...". After the handshake the
  connection was open and is now closed (idle, too slow, evicted, a frame
  over the budget): that is :class:`ConnectionLost`, whose message keeps the
  daemon's words, since retrying on this connection cannot succeed.
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from typing import Final, Generic, TypeAlias, TypeVar

from wire import RemoteProtocolError
from wire import client as cf

from ._codec import (
    NotTheClientPort,
    ReplyReader,
    SendOptions,
    append_receive,
    append_request,
    append_send,
)
from ._common import (
    MAX_CLIENT_TX_ID,
    NO_TIME_LIMIT,
    PIPELINE_FLUSH_AGE,
    PIPELINE_FLUSH_BYTES,
    SEND_MODES,
    TWO_PHASE_USE,
    require_version,
    timeout_ms,
)
from ._exceptions import (
    ConnectionLost,
    InvalidArgument,
    QueueError,
    error_from_reply,
)
from ._message import Message
from ._replies import message_or_none
from ._transaction import TransactionState

__all__ = ["MAX_REQUEST_ID", "ClientProtocol", "Flow", "Pending", "Waiter"]

#: Request ids run from 1 to this, then start again at 1 (0 is the daemon's "no request").
MAX_REQUEST_ID: Final = 0xFFFFFFFF


class Waiter:
    """The reply to one request, once it has come (None until then, and if the connection broke).

    The trio client subclasses it to wait on an event; the blocking client
    reads until ``reply`` is set.
    """

    __slots__ = ("ends", "reply", "request_id")

    def __init__(self, request_id: int) -> None:
        self.request_id = request_id
        self.reply: cf.FrameValue | None = None
        #: The transaction this request ends or prepares (a Commit, Abort, Resolve
        #: or Prepare), if any: its reply follows those of the pipelined requests.
        self.ends: TransactionState | None = None

    def wake(self) -> None:
        """Called once the reply has come, or the connection broke before it did."""


W = TypeVar("W", bound=Waiter)
T = TypeVar("T")

#: A request a call packed, for the facade to write: the waiter of its reply, and its frame.
Pending: TypeAlias = tuple[W, bytearray]

#: A call: a generator that yields each request it packed (:data:`Pending`), is
#: sent the reply (or thrown the error that writing it or waiting met), and
#: returns the call's result. It does no I/O; ``_blocking_io`` and ``_trio_io``
#: drive it (``run``).
Flow: TypeAlias = Generator[tuple[W, bytearray], cf.ServerReply, T]


class ClientProtocol(Generic[W]):
    """The state of one client connection, without I/O (see the module's docstring).

    Args:
        address: ``HOST:PORT`` of the daemon, for error messages.
        waiter: makes the :class:`Waiter` (or subclass) of a request id.
        address_in_stream_errors: whether the reasons for breaking on a
            malformed or rejected stream start with "lost the connection to
            the queue manager at ADDRESS" (the trio client's wording) or not
            (the blocking client's).

    Attributes:
        out: the bytes to write before anything else: pipelined requests,
            and the blocking client's requests.
        pipelined: request id -> transaction, for pipelined requests whose
            reply has not been read.
        broken: why the connection is unusable, or None while it is open.
    """

    __slots__ = (
        "_buffered_since",
        "_closed_by_user",
        "_make_waiter",
        "_next_id",
        "_next_tx_id",
        "_reader",
        "_refusal",
        "_stream_prefix",
        "_waiters",
        "address",
        "broken",
        "out",
        "pipelined",
        "version",
    )

    def __init__(
        self, address: str, waiter: Callable[[int], W], *, address_in_stream_errors: bool
    ) -> None:
        self.address = address
        self.out = bytearray()
        #: The adapter's clock when the oldest pipelined send in ``out`` was packed.
        self._buffered_since: float | None = None
        self.pipelined: dict[int, TransactionState] = {}
        self.broken: ConnectionLost | None = None
        #: The protocol version agreed in the handshake (0 before it).
        self.version = 0
        self._closed_by_user = False
        self._make_waiter = waiter
        self._waiters: dict[int, W] = {}
        self._next_id = 0
        self._next_tx_id = 0
        self._reader = ReplyReader(self._deliver)
        #: The daemon's refusal of the connection before the handshake, as
        #: (code, message): what the broken connection raises instead of
        #: ConnectionLost (see the module docstring).
        self._refusal: tuple[int, str] | None = None
        self._stream_prefix = self._lost_prefix() if address_in_stream_errors else ""

    # ------------------------------------------------------------------
    # State
    # ------------------------------------------------------------------

    @property
    def closed(self) -> bool:
        """True once the connection was closed or broke."""
        return self.broken is not None

    def check_open(self) -> None:
        """Raise :class:`ConnectionLost` (with the reason) if the connection is unusable.

        Raises:
            ConnectionLost: the connection is unusable.
            QueueError: the daemon refused the connection before the handshake
                (its error, ``LimitExceeded`` for a limit).
        """
        if self.broken is not None:
            raise self._broken_error()

    def _broken_error(self) -> QueueError:
        """A fresh exception for the broken connection: the daemon's refusal, or
        :class:`ConnectionLost` with the reason."""
        refusal = self._refusal
        if refusal is not None:
            return error_from_reply(*refusal)
        broken = self.broken
        return ConnectionLost(broken.message if broken is not None else "connection closed")

    def new_id(self) -> int:
        """The next request id (1 after 0xFFFFFFFF)."""
        request_id = self._next_id + 1
        if request_id > MAX_REQUEST_ID:
            request_id = 1
        self._next_id = request_id
        return request_id

    def require(self, needed: int, what: str, use: str = "") -> None:
        """Raise unless the daemon speaks protocol version ``needed`` or later.

        Raises:
            NotSupported: it is older than ``what`` (with ``use``: what upgrading gives).
        """
        require_version(self.version, needed, self.address, what, use)

    def _expect(self, request_id: int) -> W:
        waiter = self._make_waiter(request_id)
        self._waiters[request_id] = waiter
        return waiter

    # ------------------------------------------------------------------
    # Requests that wait for a reply
    # ------------------------------------------------------------------

    def request(self, out: bytearray, value: cf.ClientRequest) -> W:
        """Pack any request into ``out``; its reply comes to the returned waiter.

        Raises:
            ConnectionLost: the connection is unusable.
            InvalidArgument: the request cannot be encoded (says which field).
        """
        self.check_open()
        request_id = self.new_id()
        append_request(out, request_id, value)
        return self._expect(request_id)

    def call(self, value: cf.ClientRequest) -> Pending[W]:
        """Pack any request into a frame of its own, for a call to yield (see :meth:`request`)."""
        frame = bytearray()
        return self.request(frame, value), frame

    def send_request(
        self,
        out: bytearray,
        destination: str,
        body: bytes | bytearray | memoryview | str,
        transactional: bool | None,
        options: SendOptions,
    ) -> W:
        """Pack a send outside any transaction (the arguments of ``QueueManager.send``).

        Raises:
            InvalidArgument, MessageTooLarge: the message cannot be sent.
            ConnectionLost: the connection is unusable.
        """
        mode = SEND_MODES.get(transactional)
        if mode is None:
            msg = f"transactional must be None, False or True, not {transactional!r}"
            raise InvalidArgument(msg)
        self.check_open()
        request_id = self.new_id()
        append_send(out, request_id, 0, mode, destination, body, options)
        return self._expect(request_id)

    def receive_request(
        self,
        out: bytearray,
        state: TransactionState | None,
        queue: str,
        timeout: float | None,
        peek: bool,
        lookup_id: int | None,
    ) -> W:
        """Pack a receive or a peek, in the transaction ``state`` or (None) outside any.

        Raises:
            TransactionNotFound, or the error of a failed pipelined send:
                the transaction cannot be used.
            InvalidArgument: a value cannot be sent.
            ConnectionLost: the connection is unusable.
        """
        tx_id = 0
        if state is not None:
            state.check()
            tx_id = state.id
        wait_ms = timeout_ms(timeout)
        self.check_open()
        request_id = self.new_id()
        append_receive(out, request_id, tx_id, queue, wait_ms, peek, lookup_id)
        return self._expect(request_id)

    def cancel_receive(self, out: bytearray, waiter: W) -> bool:
        """Pack a CancelReceive of the receive ``waiter`` waits for into ``out``;
        False when none can be sent (a daemon older than ``CANCEL_VERSION``, or
        the connection is unusable). Not answered: the receive is, once."""
        if self.version < cf.CANCEL_VERSION or self.broken is not None:
            return False
        out += cf.encode_frame(self.new_id(), cf.CancelReceive(request_id=waiter.request_id))
        return True

    def receive_result(
        self, reply: cf.ServerReply, state: TransactionState | None
    ) -> Message | None:
        """The message (or None) a receive or peek in ``state`` (or outside any) got.

        Raises:
            ConnectionLost: the reply is of the wrong kind.
            TransactionNotFound, or the error of a failed pipelined send that
                came before the reply: the transaction cannot be used.
        """
        message = message_or_none(reply)
        if state is not None:
            state.check()
        return message

    def page_request(self, out: bytearray, queue: str, after: int, max_count: int) -> W:
        """Pack a PeekRange whose MessageList reply comes undecoded (``_codec.RawMessageList``)."""
        waiter = self.request(out, cf.PeekRange(queue=queue, after=after, max_count=max_count))
        self._reader.raw.add(waiter.request_id)
        return waiter

    def forget_page(self, waiter: W) -> None:
        """The reply to ``waiter``'s page came or will never come: no longer keep it raw."""
        self._reader.raw.discard(waiter.request_id)

    def prepare_request(self, out: bytearray, state: TransactionState) -> W:
        """Pack the Prepare of ``state`` into ``out``; its reply comes to the returned waiter.

        Raises:
            TransactionUsageError: the transaction has no xid, or is prepared already.
            TransactionNotFound, or the error of a failed pipelined send: the
                transaction cannot be prepared.
            ConnectionLost: the connection is unusable.
        """
        state.check_preparable()
        waiter = self.request(out, cf.Prepare(tx_id=state.id))
        # Its reply comes after every failure of the pipelined requests before it.
        waiter.ends = state
        return waiter

    def end_request(self, out: bytearray, state: TransactionState) -> W:
        """Pack the Commit, Abort or Resolve that ends ``state`` (see ``TransactionState.end``).

        Raises:
            ConnectionLost: the connection is unusable.
        """
        self.check_open()
        abort_id = self.new_id() if state.unsure else 0
        request_id = self.new_id()
        state.pack_end(out, request_id, abort_id)
        waiter = self._expect(request_id)
        waiter.ends = state
        return waiter

    # ------------------------------------------------------------------
    # Pipelined requests
    # ------------------------------------------------------------------

    def next_tx_id(self) -> int:
        """The id of the next transaction (1 after ``MAX_CLIENT_TX_ID``).

        Raises:
            ConnectionLost: the connection is unusable.
        """
        self.check_open()
        tx_id = self._next_tx_id = self._next_tx_id % MAX_CLIENT_TX_ID + 1
        return tx_id

    def begin(self, state: TransactionState) -> None:
        """Pack the Begin of ``state`` (with an id from :meth:`next_tx_id`) into ``out``.

        Raises:
            NotSupported: ``state`` has an xid and the daemon is too old for that.
        """
        if state.xid is not None:
            self.require(cf.TWO_PHASE_VERSION, "begin(xid=...)", TWO_PHASE_USE)
        request_id = self.new_id()
        state.pack_begin(self.out, request_id)
        self.pipelined[request_id] = state
        state.request_ids.append(request_id)

    def pipeline_send(
        self,
        state: TransactionState,
        destination: str,
        body: bytes | bytearray | memoryview | str,
        options: SendOptions,
        now: float,
    ) -> bool:
        """Pack a send in the transaction ``state`` into ``out``; True if ``out`` should go now
        (``now``: the adapter's monotonic clock).

        This is the client's hot path: one call per message, no objects
        besides the frame's bytes.

        Raises:
            TransactionNotFound, or the error of an earlier failed send.
            MessageTooLarge, InvalidArgument: nothing was packed; the
                transaction can still be used.
            ConnectionLost: the connection is unusable.
        """
        if state.ended or state._error is not None or state.prepared:
            state.check()
        if self.broken is not None:
            raise self._broken_error()
        request_id = self._next_id + 1
        if request_id > MAX_REQUEST_ID:
            request_id = 1
        out = self.out
        append_send(out, request_id, state.id, 0, destination, body, options)
        self._next_id = request_id
        self.pipelined[request_id] = state
        state.request_ids.append(request_id)
        return (
            len(out) > PIPELINE_FLUSH_BYTES
            or options.get("time_to_reach_queue") not in NO_TIME_LIMIT
            or options.get("time_to_be_received") not in NO_TIME_LIMIT
            or self.flush_due(now)
        )

    def flush_due(self, now: float) -> bool:
        """Whether ``out`` should go at ``now``, a pipelined send having been packed
        into it (the first since a write starts the clock): once the oldest is over
        ``PIPELINE_FLUSH_AGE`` seconds old. The daemon stamps a send's time as it
        reads it (a time limit counts from it), and a transaction it does not hear
        from is idle."""
        since = self._buffered_since
        if since is None:
            self._buffered_since = now
            return False
        return now - since > PIPELINE_FLUSH_AGE

    # ------------------------------------------------------------------
    # Bytes out, bytes in, replies
    # ------------------------------------------------------------------

    def data_to_send(self, frame: bytes | bytearray = b"") -> bytes | bytearray:
        """``out`` followed by ``frame``, to be written whole; ``out`` starts afresh.

        Raises:
            ConnectionLost: the connection is unusable.
        """
        self.check_open()
        self._buffered_since = None
        out = self.out
        if not out:
            return frame
        out += frame
        self.out = bytearray()
        return out

    def receive_data(self, data: bytes | bytearray | memoryview) -> None:
        """Take bytes read from the connection: route every whole reply in them.

        Raises:
            ConnectionLost: the bytes are not valid frames, or the daemon
                said it is closing the connection (an error reply to request
                id 0, after the handshake; the message keeps its words); the
                connection is now broken.
            QueueError: the daemon refused the connection before the
                handshake (its error reply to request id 0, raised as its
                exception: ``LimitExceeded`` for a limit); the connection is
                now broken.
        """
        try:
            self._reader.feed(data)
        except NotTheClientPort as exc:
            raise self.fail(self._stream_prefix + str(exc)) from None
        except RemoteProtocolError as exc:
            msg = f"{self._stream_prefix}the queue manager sent a malformed frame: {exc}"
            raise self.fail(msg) from None

    def _deliver(self, request_id: int, value: cf.FrameValue) -> None:
        state = self.pipelined.pop(request_id, None)
        if state is not None:
            if type(value) is cf.ErrorReply:
                state.fail(value.code, value.message, state.request_name(request_id))
            return
        waiter = self._waiters.pop(request_id, None)
        if waiter is not None:
            ended = waiter.ends
            if ended is not None:
                # Every failure of its pipelined requests was answered before this.
                pipelined = self.pipelined
                for pipelined_id in ended.request_ids:
                    pipelined.pop(pipelined_id, None)
                ended.request_ids.clear()
            waiter.reply = value
            waiter.wake()
        elif request_id == 0 and type(value) is cf.ErrorReply:
            raise self._closing_notice(value)
        # else: the reply to a request whose waiter gave up (a cancelled trio task)

    def _closing_notice(self, notice: cf.ErrorReply) -> QueueError:
        """Break the connection on the daemon's notice that it closes it (request id 0);
        return what to raise (see the module docstring)."""
        if self.version == 0 and self.broken is None:
            # Before the handshake: the daemon refused the connection.
            error = error_from_reply(notice.code, notice.message)
            reason = f"the queue manager refused the connection: {error.message}"
            self.fail(self._stream_prefix + reason)
            self._refusal = (notice.code, notice.message)
            return error
        # After it: the connection was open, and the daemon closed it.
        return self.lost(f"the queue manager closed the connection: {notice.message}")

    def forget(self, waiter: W) -> None:
        """Stop waiting for ``waiter``'s reply (it is dropped when it comes).

        The Prepare, Commit or Abort of a transaction stays registered: its
        reply still clears the transaction's pipelined request ids.
        """
        if waiter.ends is None:
            self._waiters.pop(waiter.request_id, None)

    def result(self, waiter: W) -> cf.ServerReply:
        """The reply ``waiter`` got.

        Raises:
            QueueError: the reply is an error (raised as its exception), or
                the daemon refused the connection before the handshake.
            ConnectionLost: the connection broke before the reply came.
        """
        reply = waiter.reply
        if reply is None:
            raise self._broken_error()
        if type(reply) is cf.ErrorReply:
            raise error_from_reply(reply.code, reply.message)
        return reply  # type: ignore[return-value]

    # ------------------------------------------------------------------
    # Breaking
    # ------------------------------------------------------------------

    def close(self, message: str) -> None:
        """The application closed the connection: ``message`` says so from now on.

        Buffered requests are dropped and waiters woken. A failure noticed
        afterwards that breaks it on purpose (:meth:`fail`) may still say what
        broke; a read or write cut short by the close says it was closed.
        """
        if self.broken is None:
            self.broken = ConnectionLost(message)
            self._closed_by_user = True
        self._drop()

    def fail(self, message: str) -> ConnectionLost:
        """Break the connection for the reason ``message`` (the first reason stays).

        Returns:
            A fresh :class:`ConnectionLost` with the reason, to raise.
        """
        if self.broken is None or self._closed_by_user:
            self.broken = ConnectionLost(message)
            self._closed_by_user = False
        self._drop()
        return ConnectionLost(self.broken.message)

    def lost(self, reason: str) -> ConnectionLost:
        """Break the connection because it failed or the daemon closed it; see
        :meth:`fail`. A connection the application closed is not lost: a read or
        write that fails after (or because of) the close says it was closed."""
        if self._closed_by_user and self.broken is not None:
            self._drop()
            return ConnectionLost(self.broken.message)
        return self.fail(self._lost_prefix() + reason)

    def _lost_prefix(self) -> str:
        return f"lost the connection to the queue manager at {self.address}: "

    def _drop(self) -> None:
        self.out = bytearray()
        self.pipelined.clear()
        waiters = list(self._waiters.values())
        self._waiters.clear()
        for waiter in waiters:
            waiter.wake()
