"""The HTTP listener's application: its routes, who is asking, and whether they may.

Theory of operation
-------------------
:class:`HttpApp` is an ASGI application, run by Hypercorn's HTTP/1.1
protocol on each connection the port accepts (``port``). Its routes are a
table (:data:`ROUTES`), as the client requests are: each names the need
(``qmgr.server.client.needs``) that ``Authorization.denial``, the one
place that decides what a principal may do on either port, checks before
the route's handler runs, or None for a route every caller may use. This
step of the adapter serves two routes:

* ``GET /healthz``: ``200 ok`` while the queue manager serves, ``503``
  once it is stopping; answered without authentication, for load
  balancers and orchestrators (it says nothing else);
* ``GET /metrics``: the metrics (``exposition``), for the principals of
  ``auth.monitors`` and administrators.

Everything else is ``404`` (``405`` for another method on a route).

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

Each request marks its connection busy while it runs: the port evicts only
idle connections to make room (``port``).
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Final
from urllib.parse import parse_qsl

import structlog
import trio
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Route, Router
from starlette.types import Receive, Scope, Send

from qmgr.core.permissions import Principal
from qmgr.core.tokens import MAX_TOKEN_CHARS

from ..client.authorization import Authorization
from ..client.needs import MONITORS, Need
from .exposition import Exposition

__all__ = ["CONNECTION", "CREDENTIAL_NAMES", "ROUTES", "HttpApp", "HttpConnection", "HttpRoute"]

#: The key of the connection (:class:`HttpConnection`) in an ASGI scope's ``state``.
CONNECTION: Final = "qmgr.connection"
#: Query parameters that carry a credential: a request that has one is refused.
CREDENTIAL_NAMES: Final = frozenset(
    {"access_token", "token", "bearer", "auth", "authorization", "api_key", "apikey", "password"}
)
#: What ``WWW-Authenticate`` says with a 401.
_CHALLENGE: Final = {"WWW-Authenticate": 'Bearer realm="qmgr"'}


@dataclass(slots=True, eq=False)
class HttpConnection:
    """One connection of the HTTP listener, as the port and the application share it."""

    conn_id: int
    #: ``host:port`` of the other end.
    peer: str
    #: When it was accepted (trio's clock).
    opened_at: float
    #: The common name of the client certificate it showed, if any.
    certificate_name: str | None = None
    #: Requests being answered on it now.
    active: int = 0
    #: When it last finished a request (trio's clock).
    idle_since: float = 0.0
    #: Cancelling it closes the connection (eviction).
    scope: trio.CancelScope = field(default_factory=trio.CancelScope)


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
    ) -> None:
        self.authorization = authorization
        self.exposition = exposition
        #: True once the queue manager is stopping.
        self.stopping = stopping
        self._log = log
        self._router = Router(
            routes=[Route(r.path, self._endpoint(r), methods=["GET"]) for r in routes]
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "websocket":
            await send({"type": "websocket.close", "code": 1008})
            return
        if scope["type"] != "http":
            return  # lifespan: nothing to start or stop
        connection: HttpConnection | None = scope.get("state", {}).get(CONNECTION)
        if connection is not None:
            connection.active += 1
        try:
            named = _credential_in_query(scope.get("query_string", b""))
            if named is not None:
                self._log_for(connection).warning(
                    "token_in_query_refused", path=scope.get("path", ""), parameter=named
                )
                refusal = PlainTextResponse(
                    "a token is taken only from the Authorization header (Bearer TOKEN), "
                    "never from the URL: remove it from the URL, and replace the token, "
                    "which may have been logged\n",
                    status_code=400,
                )
                await refusal(scope, receive, send)
            else:
                await self._router(scope, receive, send)
        finally:
            if connection is not None:
                connection.active -= 1
                connection.idle_since = trio.current_time()

    def _endpoint(self, route: HttpRoute) -> Callable[[Request], Awaitable[Response]]:
        async def endpoint(request: Request) -> Response:
            return await self._answer(route, request)

        return endpoint

    def _log_for(self, connection: HttpConnection | None) -> structlog.typing.FilteringBoundLogger:
        if connection is None:
            return self._log
        return self._log.bind(http=connection.conn_id, peer=connection.peer)

    async def _answer(self, route: HttpRoute, request: Request) -> Response:
        """Authenticate, authorize and run ``route`` for ``request``."""
        started = time.perf_counter()
        connection: HttpConnection | None = request.scope.get("state", {}).get(CONNECTION)
        log = self._log_for(connection).bind(method=request.method, path=route.path)
        principal: Principal | None = None
        response: Response | None = None
        if route.need is not None:
            found = self._principal(request, connection, log)
            if isinstance(found, Response):
                response = found
            else:
                principal = found
                if principal is not None:
                    log = log.bind(principal=principal.name)
                response = self._refusal(principal, request, route.need, log)
        if response is None:
            try:
                response = await route.handler(self, request)
            except Exception:
                log.exception("http_request_failed")
                response = PlainTextResponse("internal error\n", status_code=500)
        log.debug(
            "http_request",
            status=response.status_code,
            seconds=round(time.perf_counter() - started, 6),
        )
        return response

    def _principal(
        self,
        request: Request,
        connection: HttpConnection | None,
        log: structlog.typing.FilteringBoundLogger,
    ) -> Principal | Response | None:
        """Who is asking (None: nobody said), or the 401 that refuses what they said."""
        authorization = self.authorization
        header = request.headers.get("authorization")
        if header is not None:
            scheme, _, token = header.strip().partition(" ")
            token = token.strip()
            name = None
            if scheme.lower() == "bearer" and 0 < len(token) <= MAX_TOKEN_CHARS:
                name = authorization.authenticate(token)
            if name is None:
                authorization.tally.authentication_failures += 1
                log.warning("authentication_failed", method="token")
                return PlainTextResponse(
                    "the Authorization header must be 'Bearer TOKEN' with a valid token\n",
                    status_code=401,
                    headers=_CHALLENGE,
                )
            return authorization.principal(name)
        if connection is not None and connection.certificate_name is not None:
            return authorization.principal(connection.certificate_name)
        return None

    def _refusal(
        self,
        principal: Principal | None,
        request: Request,
        need: Need,
        log: structlog.typing.FilteringBoundLogger,
    ) -> Response | None:
        """The response that refuses ``request`` (401, 403), or None if it may run."""
        authorization = self.authorization
        if not authorization.enabled:
            return None
        if principal is None:
            authorization.tally.denied += 1
            log.warning("access_denied", reason="no principal: authenticate first")
            return PlainTextResponse(
                "authenticate first: a bearer token (Authorization: Bearer TOKEN) "
                "or a client certificate\n",
                status_code=401,
                headers=_CHALLENGE,
            )
        why = authorization.denial(principal, request, need)
        if why is None:
            return None
        authorization.tally.denied += 1
        log.warning("access_denied", reason=why)
        return PlainTextResponse(f"access denied: {why}\n", status_code=403)


def _credential_in_query(query: Any) -> str | None:
    """The name of the first query parameter that carries a credential, or None."""
    if not query:
        return None
    text = bytes(query).decode("latin-1")
    for name, _ in parse_qsl(text, keep_blank_values=True):
        if name.strip().lower() in CREDENTIAL_NAMES:
            return name
    return None
