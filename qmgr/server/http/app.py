"""The HTTP listener's application: its routes, who is asking, and whether they may.

Theory of operation
-------------------
:class:`HttpApp` is an ASGI application, run by Hypercorn's HTTP/1.1
protocol on each connection the port accepts (``port``). Its routes are a
table (:data:`ROUTES`), as the client requests are: each names the need
(``qmgr.server.client.needs``) that ``Authorization.denial``, the one
place that decides what a principal may do on either port, checks before
the route's handler runs, or None for a route every caller may use:

* ``GET /healthz``: ``200 ok`` while the queue manager serves, ``503``
  once it is stopping; answered without authentication, for load
  balancers and orchestrators (it says nothing else);
* ``GET /metrics``: the metrics (``exposition``), for the principals of
  ``auth.monitors`` and administrators;
* ``/api/v1/...``: the JSON API (``api``), when the daemon gives the
  application its operations (``qmgr.server.client.operations``). Its
  routes make client requests, each authorized with the need the client
  request table declares for it, so a route's need is that of the client
  requests it makes; every API route needs a principal when
  ``auth.required`` is on.

Everything else is ``404`` (``405`` for another method on a route); ``HEAD``
is answered as ``GET`` without the body (Hypercorn leaves the body out) on
every route that has a ``GET``, the API's included; under ``/api/`` every
refusal is JSON, ``{"error": {"code": ..., "message": ...}}``.

What is checked of a request before any route runs (the size of its head, a
credential in its query, a browser's ``Host`` without TLS), and whether a
browser says a page on another site made it, is in ``request_checks``; this
application decides what to answer, as follows.

The head of a request (its line and headers) is bounded by :data:`HEAD_LIMIT`
bytes. Hypercorn refuses a head whose bytes grow past it before it is whole
(``h11_max_incomplete_size``, ``service``), but not one that arrives whole in
one read: the application measures every request
before any route runs (:func:`head_size`) and answers one over the bound
as Hypercorn does, ``431`` without a body, closing the connection.

Who is asking. As on the client port: a bearer token in the
``Authorization`` header (``Bearer TOKEN``, checked by
``Authorization.authenticate``), else the common name of the client
certificate the TLS handshake showed (the port puts it on the connection).
A token that is not accepted, or a malformed header, is ``401`` and counts
as a failed authentication; without ``auth.required`` nothing else is
checked. With it, a route with a need answers ``401`` to a request without
a principal and ``403`` to one the need refuses (both ``access_denied`` in
the log and the tally). A token is never taken from the query string: a
request whose query names a credential (``access_token=...``) is refused
with ``400`` whatever its path, before any route runs, since such URLs end
up in logs and browser histories.

Browsers at a host name of another site. Without TLS, a page can make its
own host name resolve to this listener (DNS rebinding), and the browser then
takes this listener for that site: its requests are same-origin. So on a
plain-HTTP connection, a request from a browser (it sends ``Sec-Fetch-Site``
or ``Origin``) whose ``Host`` is not an IP address, ``localhost``, the
queue manager's name, the listener's host or a name of ``http.allowed_hosts``
is refused with ``421`` (``host_not_allowed``; ``http_host_refused`` in the
log) before anything else. Under TLS the certificate binds the name.

Requests from pages on other sites. A browser attaches a client
certificate, like a cookie, to a request a page on another site makes, and
a listener without ``auth.required`` needs no credential at all. So a request
that may change something (any method but ``GET``, ``HEAD`` and ``OPTIONS``)
and that a browser marks as coming from another site (:func:`cross_site`:
``Sec-Fetch-Site``, else ``Origin`` against ``Host``) is refused with ``403``
(``cross_site``; ``http_cross_site_refused`` in the log) before its body is
read or its credential looked at. Clients that are not browsers send neither
header and are not affected; the console's forms also carry a CSRF token.

A credential that is not accepted ends the connection once its ``401`` is
sent, as on the client port, so each guess pays for a new connection and
the address's slow-down (``auth.failure_limit``).

Each request marks its connection busy while it runs, except while it waits
for the bytes of its body (``api.read_body``): the port evicts connections
that are not busy to make room, and then ones whose answer waits for its
reader (``port``).
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Final

import structlog
import trio
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, RedirectResponse, Response
from starlette.routing import Route, Router
from starlette.types import Message, Receive, Scope, Send

from qmgr.core.errors import QueueManagerError
from qmgr.core.permissions import Principal
from qmgr.core.tokens import MAX_TOKEN_CHARS

from ..client.authorization import Authorization
from ..client.needs import MONITORS, OPEN, Need
from ..client.operations import Operations
from .api import API_PREFIX, API_ROUTES, ApiCall, ApiError, ApiRoute, error_body, refused_request
from .exposition import Exposition
from .port import CONNECTION, HttpConnection, address_of
from .repeats import Repeats
from .request_checks import (
    HEAD_LIMIT,
    SAFE_METHODS,
    TOKEN_IN_URL,
    credential_in_query,
    cross_site,
    head_size,
    host_message,
    host_refused,
)

__all__ = [
    "ROUTES",
    "HttpApp",
    "HttpRoute",
    "logged",
]

#: What ``WWW-Authenticate`` says with a 401.
_CHALLENGE: Final = {"WWW-Authenticate": 'Bearer realm="qmgr"'}
_AUTHENTICATE_FIRST: Final = (
    "authenticate first: a bearer token (Authorization: Bearer TOKEN) or a client certificate"
)
_BAD_CREDENTIAL: Final = "the Authorization header must be 'Bearer TOKEN' with a valid token"


class _Unauthenticated(Exception):
    """The request's credential is not accepted (a 401)."""


Handler = Callable[["HttpApp", Request], Awaitable[Response]]


@dataclass(frozen=True, slots=True)
class HttpRoute:
    """A route: its path, its need (None: open to every caller), its handler."""

    path: str
    need: Need | None
    handler: Handler


async def _health(app: HttpApp, request: Request) -> Response:
    if app.stopping():
        return PlainTextResponse("stopping\n", status_code=503)
    return PlainTextResponse("ok\n")


async def _metrics(app: HttpApp, request: Request) -> Response:
    body, content_type = await app.exposition.scrape(request.headers.get("accept"))
    return Response(body, media_type=content_type)


#: Every route the listener serves, with what it needs.
ROUTES: Final = (
    HttpRoute("/healthz", None, _health),
    HttpRoute("/metrics", MONITORS, _metrics),
)


class HttpApp:
    """The ASGI application (see the module docstring)."""

    def __init__(
        self,
        *,
        authorization: Authorization,
        exposition: Exposition[Any],
        stopping: Callable[[], bool],
        log: structlog.typing.FilteringBoundLogger,
        routes: tuple[HttpRoute, ...] = ROUTES,
        operations: Operations | None = None,
        api_routes: tuple[ApiRoute, ...] = API_ROUTES,
        host_names: frozenset[str] = frozenset(),
    ) -> None:
        self.authorization = authorization
        #: Host names (lower case) a browser may use without TLS, besides IP
        #: addresses and localhost (:func:`host_refused`).
        self.host_names = host_names
        #: Called with the ``host:port`` of a connection whose credential was not
        #: accepted (the listener slows its address down, as the client port does).
        self.on_failure: Callable[[str], None] = lambda peer: None
        self.exposition = exposition
        #: True once the queue manager is stopping.
        self.stopping = stopping
        #: The client requests the API runs (None: no API).
        self.operations = operations
        self._log = log
        #: Which refusals of each peer address are logged.
        self._denials = Repeats()
        served = [Route(r.path, self._endpoint(r), methods=["GET"]) for r in routes]
        if operations is not None:
            by_path: dict[str, dict[str, ApiRoute]] = {}
            for api_route in api_routes:
                by_path.setdefault(api_route.path, {})[api_route.method] = api_route
            served += [
                Route(path, self._api_endpoint(operations, path, methods))
                for path, methods in by_path.items()
            ]
        # No redirect of a path with or without a final "/" to the other: any
        # path not served is 404 (Starlette's would build its Location from Host).
        self._router = Router(routes=served, default=_not_found, redirect_slashes=False)

    def serve_console(self, routes: list[Route]) -> None:
        """Serve the console's ``routes`` too, and send ``/`` (and ``/console/``) there."""
        self._router.routes.extend(routes)
        self._router.routes.append(Route("/", _to_console, methods=["GET"]))
        self._router.routes.append(Route("/console/", _to_console, methods=["GET"]))

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "websocket":
            await send({"type": "websocket.close", "code": 1008})
            return
        if scope["type"] != "http":
            return  # lifespan: nothing to start or stop
        connection: HttpConnection | None = scope.get("state", {}).get(CONNECTION)
        if connection is not None:
            connection.active += 1
            send = _closing(connection, scope, send)
        try:
            size = head_size(scope)
            if size > HEAD_LIMIT:
                await self._head_too_large(scope, receive, send, connection, size)
            elif (
                connection is not None
                and not connection.tls
                and (host := host_refused(scope, self.host_names)) is not None
            ):
                self.log_for(connection).warning(
                    "http_host_refused", path=str(scope.get("path", ""))[:200], host=host[:200]
                )
                refusal = _refused(_is_api(scope), 421, "host_not_allowed", host_message(host))
                await refusal(scope, receive, send)
            elif (named := credential_in_query(scope.get("query_string", b""))) is not None:
                self.log_for(connection).warning(
                    "token_in_query_refused", path=scope.get("path", ""), parameter=named
                )
                refusal = _refused(_is_api(scope), 400, "token_in_url", TOKEN_IN_URL)
                await refusal(scope, receive, send)
            else:
                await self._router(scope, receive, send)
        finally:
            if connection is not None:
                connection.active -= 1
                connection.idle_since = trio.current_time()
                if connection.close_after and connection.active == 0 and not _http1(scope):
                    # HTTP/2 has no Connection header: the connection ends once
                    # its last request is answered.
                    connection.scope.cancel()

    async def _head_too_large(
        self,
        scope: Scope,
        receive: Receive,
        send: Send,
        connection: HttpConnection | None,
        size: int,
    ) -> None:
        """Refuse a request whose head is over :data:`HEAD_LIMIT` as Hypercorn
        refuses one that grows past it: ``431``, no body, the connection closed."""
        started = time.perf_counter()
        path = str(scope.get("path", ""))
        log = self.log_for(connection).bind(method=scope.get("method"), path=path[:200])
        log.info("http_head_too_large", size=size, limit=HEAD_LIMIT)
        headers = {"content-length": "0"}
        if _http1(scope):
            headers["connection"] = "close"  # HTTP/2 has no such header: the stream ends
        await logged(Response(status_code=431, headers=headers), log, started)(scope, receive, send)

    def _endpoint(self, route: HttpRoute) -> Callable[[Request], Awaitable[Response]]:
        async def endpoint(request: Request) -> Response:
            return await self._answer(route, request)

        return endpoint

    def _api_endpoint(
        self, operations: Operations, path: str, methods: dict[str, ApiRoute]
    ) -> Callable[[Scope, Receive, Send], Awaitable[None]]:
        # An ASGI callable rather than a function: Starlette's route then takes
        # every method, and a method the path does not serve is a JSON 405 here.
        async def endpoint(scope: Scope, receive: Receive, send: Send) -> None:
            request = Request(scope, receive)
            response = await self._api_answer(operations, path, methods, request)
            await response(scope, receive, send)

        return _Asgi(endpoint)

    async def _api_answer(
        self, operations: Operations, path: str, methods: dict[str, ApiRoute], request: Request
    ) -> Response:
        """Authenticate ``request`` and run its API route: the client requests it
        makes are authorized one by one (:meth:`authorize`)."""
        started = time.perf_counter()
        connection: HttpConnection | None = request.scope.get("state", {}).get(CONNECTION)
        log = self.log_for(connection).bind(method=request.method, path=path)
        try:
            route, call = self._api_call(operations, path, methods, request, connection, log)
            log = call.log
            answer = await route.handler(call)
            response = answer if isinstance(answer, Response) else JSONResponse(answer)
        except ApiError as exc:
            response = JSONResponse(
                error_body(exc.code, exc.message), status_code=exc.status, headers=exc.headers
            )
        except QueueManagerError as exc:
            status, code = refused_request(exc)
            response = JSONResponse(error_body(code, exc.message), status_code=status)
        except Exception:
            log.exception("http_request_failed")
            response = JSONResponse(error_body("internal", "internal error"), status_code=500)
        return logged(response, log, started)

    def _api_call(
        self,
        operations: Operations,
        path: str,
        methods: dict[str, ApiRoute],
        request: Request,
        connection: HttpConnection | None,
        log: structlog.typing.FilteringBoundLogger,
    ) -> tuple[ApiRoute, ApiCall]:
        """The route of ``request`` and what its handler works with.

        Raises:
            ApiError: 405 (another method), 401 (a credential not accepted, or
                none while ``auth.required`` is on).
        """
        route = methods.get(request.method)
        if route is None and request.method == "HEAD":
            route = methods.get("GET")  # its answer without the body (Hypercorn drops it)
        if route is None:
            allowed = ", ".join(sorted({*methods, "HEAD"} if "GET" in methods else methods))
            msg = f"{request.method} is not a method of {path}: use {allowed}"
            raise ApiError(405, "method_not_allowed", msg, {"Allow": allowed})
        if request.method not in SAFE_METHODS and (why := cross_site(request)) is not None:
            log.warning("http_cross_site_refused", reason=why)
            msg = f"refused: a page on another site made this request ({why})"
            raise ApiError(403, "cross_site", msg)
        try:
            principal = self._principal(request, connection, log)
        except _Unauthenticated:
            raise ApiError(401, "unauthenticated", _BAD_CREDENTIAL, _CHALLENGE) from None
        if principal is not None:
            log = log.bind(principal=principal.name)
        else:
            # Every API route makes client requests: none runs for nobody (a 401
            # while auth.required is on, whatever the need).
            self.authorize(None, None, OPEN, log)
        call = ApiCall(
            request,
            principal,
            log,
            operations,
            lambda value, need: self.authorize(principal, value, need, call.log),
            route.requests,
        )
        return route, call

    def authorize(
        self,
        principal: Principal | None,
        value: Any,
        need: Need,
        log: structlog.typing.FilteringBoundLogger,
    ) -> None:
        """Check the client request ``value`` an API route makes against ``need``.

        Raises:
            ApiError: 401 without a principal, 403 when the need refuses it.
        """
        if value is not None:
            log = log.bind(request=type(value).__name__)
        refusal = self.refusal(principal, value, need, log)
        if refusal is not None:
            status, code, message = refusal
            raise ApiError(status, code, message, _CHALLENGE if status == 401 else None)

    def log_for(self, connection: HttpConnection | None) -> structlog.typing.FilteringBoundLogger:
        if connection is None:
            return self._log
        return self._log.bind(http=connection.conn_id, peer=connection.peer)

    async def _answer(self, route: HttpRoute, request: Request) -> Response:
        """Authenticate, authorize and run ``route`` for ``request``."""
        started = time.perf_counter()
        connection: HttpConnection | None = request.scope.get("state", {}).get(CONNECTION)
        log = self.log_for(connection).bind(method=request.method, path=route.path)
        principal: Principal | None = None
        response: Response | None = None
        if route.need is not None:
            try:
                principal = self._principal(request, connection, log)
            except _Unauthenticated:
                response = _refused(False, 401, "unauthenticated", _BAD_CREDENTIAL)
            else:
                if principal is not None:
                    log = log.bind(principal=principal.name)
                refusal = self.refusal(principal, request, route.need, log)
                if refusal is not None:
                    response = _refused(False, *refusal)
        if response is None:
            try:
                response = await route.handler(self, request)
            except Exception:
                log.exception("http_request_failed")
                response = PlainTextResponse("internal error\n", status_code=500)
        return logged(response, log, started)

    def _principal(
        self,
        request: Request,
        connection: HttpConnection | None,
        log: structlog.typing.FilteringBoundLogger,
    ) -> Principal | None:
        """Who is asking (None: nobody said).

        Raises:
            _Unauthenticated: what they said is not accepted (counted and logged).
        """
        authorization = self.authorization
        header = request.headers.get("authorization")
        if header is not None:
            scheme, _, token = header.strip().partition(" ")
            bearer = token.strip() if scheme.lower() == "bearer" else ""
            name = self.token_name(bearer, connection, log, method="token")
            if name is None:
                raise _Unauthenticated
            return authorization.principal(name)
        if connection is not None and connection.certificate_name is not None:
            return authorization.principal(connection.certificate_name)
        return None

    def token_name(
        self,
        token: str,
        connection: HttpConnection | None,
        log: structlog.typing.FilteringBoundLogger,
        *,
        method: str,
    ) -> str | None:
        """The principal's name ``token`` stands for (a bearer token, or the console's
        login form: ``method``), or None: not accepted, which is counted, logged
        (``authentication_failed``) and slows the connection's address down."""
        authorization = self.authorization
        name = None
        if 0 < len(token) <= MAX_TOKEN_CHARS:
            name = authorization.authenticate(token)
        if name is None:
            authorization.tally.authentication_failures += 1
            log.warning("authentication_failed", method=method)
            if connection is not None:
                self.on_failure(connection.peer)
                connection.close_after = True
        return name

    def refusal(
        self,
        principal: Principal | None,
        request: Any,
        need: Need,
        log: structlog.typing.FilteringBoundLogger,
    ) -> tuple[int, str, str] | None:
        """Why ``request`` (the HTTP request, or the client request an API
        route makes) is refused, as a status (401, 403), a code and a message
        (counted and logged), or None if it may run."""
        authorization = self.authorization
        if not authorization.enabled:
            return None
        if principal is None:
            authorization.tally.denied += 1
            self._denied(log, "no principal: authenticate first")
            return 401, "unauthenticated", _AUTHENTICATE_FIRST
        why = authorization.denial(principal, request, need)
        if why is None:
            return None
        authorization.tally.denied += 1
        self._denied(log, why)
        return 403, "access_denied", f"access denied: {why}"

    def _denied(self, log: structlog.typing.FilteringBoundLogger, reason: str) -> None:
        """Log a refusal (``access_denied``): the first of its kind (a principal,
        or nobody, from a peer address, making one request or route, refused
        for one reason: which queue it tried), then at most one a minute,
        saying how many were passed over (:mod:`.repeats`)."""
        context = structlog.get_context(log)
        kind = "\n".join(
            (
                address_of(str(context.get("peer", ""))),
                str(context.get("principal", "")),
                str(context.get("request", context.get("path", ""))),
                reason,
            )
        )
        passed_over = self._denials.take(kind, trio.current_time())
        if passed_over is None:
            return
        if passed_over:
            log.warning("access_denied", reason=reason, passed_over=passed_over)
        else:
            log.warning("access_denied", reason=reason)


def logged(
    response: Response, log: structlog.typing.FilteringBoundLogger, started: float
) -> Response:
    """``response``, once its request is logged (``http_request``): its status and
    the seconds since ``started`` (``time.perf_counter``)."""
    log.debug(
        "http_request",
        status=response.status_code,
        seconds=round(time.perf_counter() - started, 6),
    )
    return response


async def _to_console(request: Request) -> Response:
    return RedirectResponse("/console", status_code=303)


def _http1(scope: Scope) -> bool:
    return scope.get("http_version") in ("1.0", "1.1")


def _closing(connection: HttpConnection, scope: Scope, send: Send) -> Send:
    """``send``, which on HTTP/1 adds ``Connection: close`` to the answer once a
    credential has been refused on ``connection`` (the server then closes it)."""
    if not _http1(scope):
        return send

    async def closing(message: Message) -> None:
        if message["type"] == "http.response.start" and connection.close_after:
            headers = [*message.get("headers", ()), (b"connection", b"close")]
            message = {**message, "headers": headers}
        await send(message)

    return closing


def _is_api(scope: Scope) -> bool:
    return str(scope.get("path", "")).startswith(API_PREFIX)


def _refused(api: bool, status: int, code: str, message: str) -> Response:
    """A refusal: JSON under ``/api/``, else text (with the challenge for a 401)."""
    headers = _CHALLENGE if status == 401 else None
    if api:
        return JSONResponse(error_body(code, message), status_code=status, headers=headers)
    return PlainTextResponse(message + "\n", status_code=status, headers=headers)


async def _not_found(scope: Scope, receive: Receive, send: Send) -> None:
    """No route has this path (JSON under ``/api/``)."""
    path = str(scope.get("path", ""))
    if _is_api(scope):
        message = f"no such route: {path} (the routes are listed in docs/operations.md)"
        response = _refused(True, 404, "not_found", message)
    else:
        response = PlainTextResponse("Not Found", status_code=404)
    await response(scope, receive, send)


@dataclass(frozen=True, slots=True)
class _Asgi:
    """An ASGI callable that Starlette takes for an application, not an endpoint."""

    run: Callable[[Scope, Receive, Send], Awaitable[None]]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self.run(scope, receive, send)
