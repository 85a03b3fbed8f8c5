"""The HTTP API, ``/api/v1/...``: the queue manager's operations as JSON over HTTP.

Theory of operation
-------------------
Each route of :data:`API_ROUTES` reads its parameters (the path, the query,
a JSON body), makes the client requests that do what it asks, and answers
with the JSON that ``qmgr ... --json`` prints for the same thing
(``qmgr.client.shapes``). It does nothing the client requests' handlers do
not: :meth:`ApiCall.run` authorizes each request with the need the request
table declares for it (``Operations.need``, ``Authorization.denial``) and
runs its handler (``Operations.run``), whose log events (``queue_purged``,
``messages_moved``, ``outgoing_paused``, ``transactions_committed``...) go
to the request's log, with the principal bound. A route names the requests
it may make (:attr:`ApiRoute.requests`): its need is theirs, and the
documentation's table is made from them.

The replies are converted with the SDK's ``from_wire`` and shaped by
``qmgr.client.shapes``, as the CLI does: one definition of each shape.

Bounds: a JSON body of at most :data:`MAX_BODY` bytes (``413`` past it,
``400`` when it is not a JSON object, or when the client stops sending it
before its end: :func:`read_body`, where every body of the API and the
console is read), sent as ``application/json`` (``415`` otherwise), each key
given once in each object (``400``: :meth:`ApiCall.body`, ``json_body``); a
whole number within its range (``400`` naming the field otherwise, and
repeating its value up to ``json_body.SHOWN`` characters, from the query or
the body: :meth:`ApiCall.number`); a page of messages of at most
:data:`MAX_PAGE` messages, each body given as base64 of at most
:data:`BODY_BOUND` bytes (``shapes.message_json``), and the whole page
within one client-protocol frame, as a peek of a range is.

Errors are ``{"error": {"code": ..., "message": ...}}``: a refused request
of the client protocol has the lower-case name of its ``ErrorCode``
(``queue_not_found``, ``access_denied``...) and the status of
:data:`STATUS_OF`, except a message the queue does not hold,
``message_not_found`` (:func:`refused_request`); the API's own refusals have
their own codes (``bad_request``, ``payload_too_large``,
``unsupported_media_type``...). ``app`` answers the others
(``not_found``, ``method_not_allowed``, ``unauthenticated``).
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final, TypeVar

import structlog
import trio
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response

from qmgr.client import IncomingInfo, Message, OutgoingInfo, QueueInfo, Status, TransactionInfo
from qmgr.client.calls.routing import Routing
from qmgr.client.shapes import (
    incoming_json,
    message_json,
    outgoing_json,
    queue_json,
    status_json,
    transaction_json,
)
from qmgr.core.errors import MessageNotFound, NotSupported, QueueManagerError
from qmgr.core.permissions import Principal
from wire import client as cf

from ..client.needs import Need
from ..client.operations import Operations, OutgoingAction, error_code
from .json_body import SHOWN, BodyProblem, content_type_problem, json_object, shown_number
from .port import CONNECTION, HttpConnection

__all__ = [
    "API_PREFIX",
    "API_ROUTES",
    "BODY_BOUND",
    "LOOKUP_IDS",
    "MAX_BODY",
    "MAX_PAGE",
    "STATUS_OF",
    "ApiCall",
    "ApiError",
    "ApiRoute",
    "error_body",
    "read_body",
    "refused_request",
    "whole_number",
]

R = TypeVar("R")

#: Where the API's routes are.
API_PREFIX: Final = "/api/"
#: Bytes of a request's JSON body.
MAX_BODY: Final = 64 * 1024
#: Messages of one page (``max``), and when ``max`` is not given.
MAX_PAGE: Final = 1000
DEFAULT_PAGE: Final = 100
#: Bytes of each message body a page gives (base64 in the JSON).
BODY_BOUND: Final = 64 * 1024
#: Transactions one listing gives at most, and when ``max`` is not given.
MAX_TRANSACTIONS: Final = 10_000
DEFAULT_TRANSACTIONS: Final = 1000
#: A whole list of more entries than this is shaped and encoded in a worker
#: thread (as the client port encodes its long lists).
ENCODE_AWAY: Final = 2_000
#: The LookupIds a request may name (64 bits; 0: none).
LOOKUP_IDS: Final = (0, 2**64 - 1)

#: The HTTP status of each error of the client protocol.
STATUS_OF: Final[Mapping[cf.ErrorCode, int]] = {
    cf.ErrorCode.QUEUE_NOT_FOUND: 404,
    cf.ErrorCode.QUEUE_EXISTS: 409,
    cf.ErrorCode.INVALID_NAME: 400,
    cf.ErrorCode.MESSAGE_TOO_LARGE: 413,
    cf.ErrorCode.QUOTA_EXCEEDED: 507,
    cf.ErrorCode.TRANSACTION_USAGE: 409,
    cf.ErrorCode.TRANSACTION_NOT_FOUND: 404,
    cf.ErrorCode.TRANSACTION_ABORTED: 409,
    cf.ErrorCode.TRANSACTION_COMMITTED: 409,
    cf.ErrorCode.TRANSACTION_TOO_LARGE: 413,
    cf.ErrorCode.STORE_FULL: 507,
    cf.ErrorCode.ACCESS_DENIED: 403,
    cf.ErrorCode.INVALID_ARGUMENT: 400,
    cf.ErrorCode.NOT_SUPPORTED: 501,
    cf.ErrorCode.LIMIT_EXCEEDED: 429,
    cf.ErrorCode.SHUTTING_DOWN: 503,
    cf.ErrorCode.INTERNAL: 500,
}

_TRUE: Final = frozenset({"1", "true", "yes", "on"})
_FALSE: Final = frozenset({"", "0", "false", "no", "off"})


def whole_number(text: str, name: str, low: int, high: int) -> int:
    """``text`` (the value of ``name``) as a whole number within ``low..high``.

    Raises:
        ApiError: 400, it is not one.
    """
    if not (text.isascii() and text.isdigit() and len(text) <= 20) or not (
        low <= int(text) <= high
    ):
        shown = repr(text) if len(text) <= SHOWN else f"a value of {len(text)} characters"
        raise _out_of_range(name, low, high, shown)
    return int(text)


def _out_of_range(name: str, low: int, high: int, shown: str) -> ApiError:
    msg = f"{name} must be a whole number from {low} to {high}, not {shown}"
    return ApiError(400, "bad_request", msg)


def refused_request(error: QueueManagerError) -> tuple[int, str]:
    """The status and code of a client request the queue manager refused: its
    error code of the client protocol, in lower case, with the status of
    :data:`STATUS_OF`; a message the queue does not hold is ``message_not_found``
    (the client protocol carries it as ``queue_not_found``)."""
    code = error_code(error)
    status = STATUS_OF.get(code, 500)
    if isinstance(error, MessageNotFound):
        return status, "message_not_found"
    return status, code.name.lower()


def error_body(code: str, message: str) -> dict[str, Any]:
    """The JSON of an error."""
    return {"error": {"code": code, "message": message}}


class ApiError(Exception):
    """A refusal of the API: its status, code and message (and headers)."""

    def __init__(
        self, status: int, code: str, message: str, headers: Mapping[str, str] | None = None
    ) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.headers = dict(headers or {})


#: Authorize a client request with its need: None, or raises ApiError (403).
Authorize = Callable[[Any, Need], None]


@dataclass(slots=True, eq=False)
class ApiCall:
    """One request to the API, as its route's handler sees it."""

    request: Request
    principal: Principal | None
    log: structlog.typing.FilteringBoundLogger
    operations: Operations
    authorize: Authorize
    #: The client requests the route may make.
    allowed: tuple[type[Any], ...] = ()
    _body: dict[str, Any] | None = field(default=None, repr=False)

    async def run(self, value: Any, reply: type[R]) -> R:
        """Authorize ``value`` (a client request) and run it; its reply, of type ``reply``."""
        kind = type(value)
        assert kind in self.allowed, f"the route does not declare {kind.__name__}"
        self.authorize(value, self.operations.need(kind))
        found = await self.operations.run(value, principal=self.principal, log=self.log)
        assert isinstance(found, reply), found
        return found

    async def whole_list(self, entries: int, shape: Callable[[], Any]) -> Any:
        """What ``shape`` makes of a whole list of ``entries`` (queues, the
        status): made and encoded as JSON in a worker thread, one list at a
        time, past :data:`ENCODE_AWAY` entries, so that the event loop goes on
        serving clients and peers (tens of thousands of queues take a second);
        the shaped value itself for a short one."""
        if entries <= ENCODE_AWAY:
            return shape()

        def encode() -> bytes:
            return json_bytes(shape())

        limiter = self.operations.services.list_encoder
        body = await trio.to_thread.run_sync(encode, limiter=limiter)
        return Response(body, media_type="application/json")

    async def optional(self, value: Any, reply: type[R]) -> R | None:
        """:meth:`run`, or None where the queue manager does not do it (no peering)."""
        try:
            return await self.run(value, reply)
        except NotSupported:
            return None

    def path(self, name: str) -> str:
        """A parameter of the path."""
        return str(self.request.path_params[name])

    def integer(self, name: str, default: int, low: int, high: int) -> int:
        """A whole-number query parameter within ``low..high``.

        Raises:
            ApiError: 400, it is not one.
        """
        text = self.request.query_params.get(name)
        return default if text is None else whole_number(text, name, low, high)

    def flag(self, name: str) -> bool:
        """A yes/no query parameter (``1``, ``true``, ``yes`` / ``0``, ``false``, ``no``)."""
        text = self.request.query_params.get(name)
        if text is None:
            return False
        if text.lower() in _TRUE:
            return True
        if text.lower() in _FALSE:
            return False
        msg = f"{name} must be true or false, not {text!r}"
        raise ApiError(400, "bad_request", msg)

    async def body(self) -> dict[str, Any]:
        """The JSON object of the request's body (``{}`` when it is empty).

        A body that is not empty must say it is JSON (``Content-Type:
        application/json``, in UTF-8 if it names a charset), and may give each
        key of an object once: a body that gives one twice is ambiguous (some
        parsers take the first, others the last), so it is refused, at any
        depth, rather than read one way.

        Raises:
            ApiError: 413 past :data:`MAX_BODY`; 415 when it does not say it is
                JSON; 400 when it is not a JSON object or gives a key twice.
        """
        if self._body is not None:
            return self._body
        data = await read_body(self.request, MAX_BODY, self.log)
        if not data.strip():
            self._body = {}
            return self._body
        problem = content_type_problem(self.request.headers.get("content-type"))
        if problem is not None:
            msg = f"the body must be sent with Content-Type: application/json ({problem})"
            raise ApiError(415, "unsupported_media_type", msg)
        try:
            found = json_object(data)
        except BodyProblem as exc:
            raise ApiError(400, "bad_request", exc.message) from None
        self._body = found
        return found

    async def takes(self, *names: str) -> None:
        """Check that the body's object gives no field but ``names``: a misspelt
        field is refused rather than passed over, since the action would then
        act on its default (another message, say).

        Raises:
            ApiError: 400, naming the first field it does not take.
        """
        for name in await self.body():
            if name not in names:
                takes = ", ".join(repr(n) for n in names) or "no field"
                msg = f"unknown field {name!r}: this action takes {takes}"
                raise ApiError(400, "bad_request", msg)

    async def given(self, name: str, kind: type[R], default: R | None = None) -> R:
        """A field of the body's object, of type ``kind`` (``default`` if absent).

        Raises:
            ApiError: 400, missing without a default, or not a ``kind``.
        """
        found = (await self.body()).get(name, default)
        if found is None:
            msg = f"the body must give {name!r}"
            raise ApiError(400, "bad_request", msg)
        if not isinstance(found, kind) or (kind is int and isinstance(found, bool)):
            msg = f"{name!r} must be {_JSON_TYPES.get(kind, kind.__name__)}"
            raise ApiError(400, "bad_request", msg)
        return found

    async def number(self, name: str, default: int, low: int, high: int) -> int:
        """A whole-number field of the body's object within ``low..high``
        (``default`` if absent): every integer of a body is read so, never
        with :meth:`given` alone.

        Raises:
            ApiError: 400, it is not one.
        """
        found = await self.given(name, int, default)
        if not low <= found <= high:
            raise _out_of_range(repr(name), low, high, shown_number(found))
        return found


_JSON_TYPES: Final[Mapping[type[Any], str]] = {
    str: "a string",
    int: "a whole number",
    bool: "true or false",
}


async def read_body(
    request: Request, limit: int, log: structlog.typing.FilteringBoundLogger
) -> bytes:
    """The body of ``request``, read in chunks, of at most ``limit`` bytes: the
    one place where the API and the console read a body.

    A client that closes its connection, or stops sending (``http.request_timeout``),
    before its body's end is at fault, not the daemon: that is logged
    (``http_client_disconnected``, info) and refused with ``400``, which
    reaches the client if its connection can still take it. Nothing has
    been done then: every route reads its body before its first client request.
    So while it waits for the body's bytes, the request does not keep its
    connection busy: the port may close the connection to make room, as for
    one still sending its head.

    Raises:
        ApiError: 413, it is (or says it is) larger; 400, it ended early.
    """
    declared = request.headers.get("content-length", "")
    too_large = ApiError(413, "payload_too_large", f"the body must be at most {limit} bytes")
    if declared.isascii() and declared.isdigit() and int(declared) > limit:
        raise too_large
    data = bytearray()
    connection: HttpConnection | None = request.scope.get("state", {}).get(CONNECTION)
    if connection is not None:
        connection.active -= 1
    try:
        async for chunk in request.stream():
            data += chunk
            if len(data) > limit:
                raise too_large
    except ClientDisconnect:
        log.info("http_client_disconnected", received=len(data), declared=declared or None)
        of = f" of {declared}" if declared else ""
        msg = (
            f"the body stopped after {len(data)}{of} bytes: the client closed the "
            "connection or stopped sending"
        )
        raise ApiError(400, "bad_request", msg) from None
    finally:
        if connection is not None:
            connection.active += 1
    # Closed to make room while it waited (the cancel lands at the next
    # checkpoint): stop here, before the route does anything.
    await trio.lowlevel.checkpoint_if_cancelled()
    return bytes(data)


Handler = Callable[[ApiCall], Awaitable[Any]]


@dataclass(frozen=True, slots=True)
class ApiRoute:
    """A route of the API: method, path, the client requests it makes, its handler."""

    method: str
    path: str
    requests: tuple[type[Any], ...]
    handler: Handler

    def needs(self) -> tuple[Need, ...]:
        """The needs of its requests, as the request table declares them."""
        return tuple(Operations.need(request) for request in self.requests)


# ---------------------------------------------------------------------- reading


async def _status(call: ApiCall) -> Any:
    info = await call.run(cf.GetStatus(), cf.StatusInfo)
    routing = await call.optional(cf.GetRouting(destination=""), cf.RoutingInfo)
    converted = None if routing is None else Routing.from_wire(routing)
    entries = len(info.queues) + len(info.outgoing) + len(info.incoming)
    return await call.whole_list(entries, lambda: status_json(Status.from_wire(info), converted))


async def _queues(call: ApiCall) -> Any:
    listed = await call.run(cf.ListQueues(), cf.QueueList)
    return await call.whole_list(
        len(listed.queues), lambda: [queue_json(QueueInfo.from_wire(i)) for i in listed.queues]
    )


def json_bytes(content: Any) -> bytes:
    """``content`` as the API's JSON bytes (as Starlette's ``JSONResponse`` renders it)."""
    return json.dumps(
        content, ensure_ascii=False, allow_nan=False, indent=None, separators=(",", ":")
    ).encode("utf-8")


async def peek_page(
    call: ApiCall, queue: str, after: int, most: int
) -> tuple[list[Message], int | None]:
    """Up to ``most`` messages of ``queue`` after the LookupId ``after``, and the
    LookupId to start the next page after (None: this is the last page).

    One message more than asked says that more follow. The queue manager ends
    a reply at one frame's bytes (about 4 MB), so a page with fewer than that
    may be one cut short: then a count of the messages after its last one
    (``MeasureRange``, which carries no body) says.
    """
    request = cf.PeekRange(queue=queue, after=after, max_count=most + 1)
    found = (await call.run(request, cf.MessageList)).messages
    page = [Message.from_wire(message) for message in found[:most]]
    if not page:
        return page, None
    last = page[-1].lookup_id
    if len(found) > most:
        return page, last
    beyond = cf.MeasureRange(queue=queue, after=last, max_count=1)
    more = (await call.run(beyond, cf.RangeInfo)).count > 0
    return page, last if more else None


async def _messages(call: ApiCall) -> Any:
    name = call.path("name")
    after = call.integer("after", 0, 0, 2**64 - 1)
    most = call.integer("max", DEFAULT_PAGE, 1, MAX_PAGE)
    page, next_after = await peek_page(call, name, after, most)
    return {
        "queue": page[0].queue if page else name,
        "messages": [message_json(message, bounded=BODY_BOUND) for message in page],
        "next_after": next_after,
    }


async def _outgoing(call: ApiCall) -> Any:
    listed = await call.run(cf.ListOutgoing(), cf.OutgoingList)
    shown = []
    for info in listed.outgoing:
        asked = cf.GetRouting(destination=info.destination)
        routing = await call.optional(asked, cf.RoutingInfo)
        converted = None if routing is None else Routing.from_wire(routing)
        shown.append(outgoing_json(OutgoingInfo.from_wire(info), converted, with_alternates=True))
    return shown


async def _incoming(call: ApiCall) -> Any:
    info = await call.run(cf.GetStatus(), cf.StatusInfo)
    return [incoming_json(IncomingInfo.from_wire(sequence)) for sequence in info.incoming]


async def _transactions(call: ApiCall) -> Any:
    request = cf.ListTransactions(
        prefix=call.request.query_params.get("prefix", ""),
        resolved=call.flag("all"),
        max_count=call.integer("max", DEFAULT_TRANSACTIONS, 1, MAX_TRANSACTIONS),
    )
    listed = await call.run(request, cf.TransactionList)
    return [transaction_json(TransactionInfo.from_wire(info)) for info in listed.transactions]


# ---------------------------------------------------------------------- actions


async def _purge(call: ApiCall) -> Any:
    name = call.path("name")
    await call.takes()  # an empty object, or no body at all
    done = await call.run(cf.PurgeQueue(name=name), cf.Ok)
    return {"queue": name, "purged": done.value}


async def _move(call: ApiCall) -> Any:
    source = call.path("name")
    await call.takes("to", "lookup_id", "all")
    target = await call.given("to", str)
    lookup_id = await call.number("lookup_id", 0, *LOOKUP_IDS)
    every = await call.given("all", bool, False)
    if every and lookup_id:
        msg = "give lookup_id or all, not both"
        raise ApiError(400, "bad_request", msg)
    request = cf.MoveMessages(source=source, target=target, lookup_id=lookup_id, all=every)
    moved = await call.run(request, cf.Moved)
    return {
        "source": source,
        "target": target,
        "count": moved.count,
        "lookup_id": moved.lookup_id or None,
    }


def _control(action: OutgoingAction) -> Handler:
    async def control(call: ApiCall) -> Any:
        await call.takes("destination")
        destination = await call.given("destination", str)
        request = cf.ControlOutgoing(action=int(action), destination=destination)
        done = await call.run(request, cf.OutgoingList)
        return {
            "outgoing": outgoing_json(OutgoingInfo.from_wire(done.outgoing[0])),
            "purged": done.purged,
        }

    return control


def _resolve(*, commit: bool) -> Handler:
    async def resolve(call: ApiCall) -> Any:
        await call.takes("xid")
        xid = await call.given("xid", str)
        done = await call.run(cf.Resolve(xids=(xid,), commit=commit), cf.Resolutions)
        return {"xid": xid, "resolution": cf.Resolution(done.outcomes[0]).name.lower()}

    return resolve


_V1: Final = "/api/v1"
_QUEUE: Final = _V1 + "/queues/{name:path}"

#: Every route of the API.
API_ROUTES: Final = (
    ApiRoute("GET", _V1 + "/status", (cf.GetStatus, cf.GetRouting), _status),
    ApiRoute("GET", _V1 + "/queues", (cf.ListQueues,), _queues),
    ApiRoute("GET", _QUEUE + "/messages", (cf.PeekRange, cf.MeasureRange), _messages),
    ApiRoute("POST", _QUEUE + "/purge", (cf.PurgeQueue,), _purge),
    ApiRoute("POST", _QUEUE + "/move", (cf.MoveMessages,), _move),
    ApiRoute("GET", _V1 + "/outgoing", (cf.ListOutgoing, cf.GetRouting), _outgoing),
    ApiRoute(
        "POST", _V1 + "/outgoing/pause", (cf.ControlOutgoing,), _control(OutgoingAction.PAUSE)
    ),
    ApiRoute(
        "POST", _V1 + "/outgoing/resume", (cf.ControlOutgoing,), _control(OutgoingAction.RESUME)
    ),
    ApiRoute(
        "POST", _V1 + "/outgoing/purge", (cf.ControlOutgoing,), _control(OutgoingAction.PURGE)
    ),
    ApiRoute("GET", _V1 + "/incoming", (cf.GetStatus,), _incoming),
    ApiRoute("GET", _V1 + "/transactions", (cf.ListTransactions,), _transactions),
    ApiRoute("POST", _V1 + "/transactions/commit", (cf.Resolve,), _resolve(commit=True)),
    ApiRoute("POST", _V1 + "/transactions/abort", (cf.Resolve,), _resolve(commit=False)),
)
