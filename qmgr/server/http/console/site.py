"""The console's site: its routes, who is looking, their session, and how pages are made.

Theory of operation
-------------------
:class:`Console` serves everything under ``/console``. Each request goes
through :meth:`Console.visit`, which settles who is asking before any page
or action runs:

1. **the session**: the cookie :data:`COOKIE` names a live session
   (``sessions``), or, when there is none, a session is opened at once for
   a client certificate the TLS handshake showed, or for nobody when
   ``auth.required`` is off; otherwise the browser goes to the login form
   (``303``; a refresh of a live region gets ``401``, and reloads). The
   cookie is ``HttpOnly``, ``SameSite=Strict``, ``Path=/console``, and
   ``Secure`` on a TLS connection; it holds only the session's random id.
2. **the principal** is made again from the session's name at every
   request (``Authorization.principal``).
3. **an action** (every ``POST``) must carry the session's CSRF token in
   its form, and an ``Origin`` header, when the browser sends one, must be
   this listener's; otherwise it is ``403`` and ``console_csrf_refused`` is
   logged. A form's body is bounded (:data:`MAX_FORM`).

Pages and actions then make client requests through an ``ApiCall``, as the
JSON API does: each request is authorized by ``Authorization.denial`` with
the need the request table declares for it, and its handler's events go to
the visit's log, with the principal bound. A refusal is a page with its
status (``403``: what right is missing).

Pages are rendered by Jinja2 with autoescaping on, so a queue name, label
or body shows as text, never as markup; every response carries a
Content-Security-Policy that allows only this site's own script and style
(``static/``), no inline script, and no framing. A page that updates itself
has a ``main`` element with ``data-refresh``: the console's script fetches
the same URL every :data:`REFRESH_MS` milliseconds with the header
:data:`FRAGMENT` and replaces the element's content with the answer, the
page's ``content`` block alone.

The login form takes a token and checks it as the client port does; a
token not accepted counts as a failed authentication, and the listener
slows the address down (``app.HttpApp.on_failure``).
"""

from __future__ import annotations

import datetime as dt
import html
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from importlib import resources
from typing import TYPE_CHECKING, Any, Final
from urllib.parse import parse_qsl, urlencode

import structlog
import trio
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import Route

from qmgr.core.errors import QueueManagerError
from qmgr.core.permissions import Principal
from qmgr.texts import age, size

from ...client.needs import MONITORS, Need
from ...client.operations import Operations, error_code
from ..api import STATUS_OF, ApiCall, ApiError, read_body, whole_number
from ..app import HttpApp, logged
from ..port import CONNECTION
from ..rates import SAMPLE_SECONDS, RateHistory
from ..request_checks import cross_site
from ..sources import MetricsSources
from .sessions import MAX_NOTICES, ConsoleSession, ConsoleSessions

if TYPE_CHECKING:
    import jinja2

__all__ = [
    "COOKIE",
    "FRAGMENT",
    "MAX_FORM",
    "PREFIX",
    "REFRESH_MS",
    "Console",
    "ConsoleRoute",
    "Visit",
]

#: Where the console is.
PREFIX: Final = "/console"
#: The session cookie's name.
COOKIE: Final = "qmgr_console"
#: The header of a live region's refresh.
FRAGMENT: Final = "X-Console-Fragment"
#: Milliseconds between two refreshes of a live page.
REFRESH_MS: Final = 2000
#: Bytes of an action's form.
MAX_FORM: Final = 16 * 1024
#: Fields of an action's form.
_MAX_FIELDS: Final = 32

_SECURITY_HEADERS: Final = {
    "Content-Security-Policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
        "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    # Not "no-referrer": a browser would then send "Origin: null" with the forms.
    "Referrer-Policy": "same-origin",
    "X-Frame-Options": "DENY",
    "Cache-Control": "no-store",
}
_STATIC_TYPES: Final = {".js": "text/javascript", ".css": "text/css", ".svg": "image/svg+xml"}


@dataclass(slots=True, eq=False)
class Visit:
    """One request to the console, as a page or an action sees it."""

    request: Request
    session: ConsoleSession
    principal: Principal | None
    log: structlog.typing.FilteringBoundLogger
    #: Runs the client requests the page makes, each authorized.
    call: ApiCall
    #: Only the live region is asked for (a refresh).
    fragment: bool
    #: The action's form (empty for a page).
    form: dict[str, str] = field(default_factory=dict)
    #: Whether the session was opened by this request (its cookie is set).
    opened: bool = False

    def query(self, name: str, default: str = "") -> str:
        """A parameter of the URL's query."""
        return self.request.query_params.get(name, default)

    @property
    def login(self) -> bool:
        """Whether this is the login form's page or action."""
        return self.request.url.path.endswith("/login")

    def number(self, value: str, name: str, low: int = 0, high: int = 2**64 - 1) -> int:
        """``value`` as a whole number within ``low..high``.

        Raises:
            ApiError: 400, it is not one.
        """
        return whole_number(value, name, low, high)

    def notice(self, text: str) -> None:
        """Say ``text`` at the top of the next page this session sees (the last
        :data:`~.sessions.MAX_NOTICES` of them)."""
        notices = self.session.notices
        notices.append(text)
        del notices[:-MAX_NOTICES]


Page = Callable[["Console", Visit], Awaitable[Response]]


@dataclass(frozen=True, slots=True)
class ConsoleRoute:
    """A route of the console: method, path under :data:`PREFIX`, handler."""

    method: str
    path: str
    handler: Page


class Console:
    """The web console (see the module docstring)."""

    def __init__(
        self,
        *,
        host: HttpApp,
        operations: Operations,
        sources: MetricsSources,
        sessions: ConsoleSessions,
        routes: tuple[ConsoleRoute, ...],
        allowed: tuple[type[Any], ...],
        history: RateHistory,
        clock: Callable[[], float] = trio.current_time,
    ) -> None:
        self.host = host
        self.operations = operations
        self.sources = sources
        self.sessions = sessions
        #: The rates the pages show (sampled by the listener, ``..sources``).
        self.history = history
        self._clock = clock
        self._allowed = allowed
        self._routes = routes
        # Made at the first page (Jinja2 is imported then: a daemon whose
        # console nobody opens does not carry it).
        self._templates: jinja2.Environment | None = None
        self._static = {
            entry.name: entry.read_bytes()
            for entry in resources.files("qmgr.server.http.console").joinpath("static").iterdir()
            if entry.name.endswith(tuple(_STATIC_TYPES))
        }

    # ------------------------------------------------------------------ routes

    def starlette_routes(self) -> list[Route]:
        """The console's routes, for the application's router."""
        by_path: dict[str, dict[str, Page]] = {}
        for route in self._routes:
            by_path.setdefault(PREFIX + route.path, {})[route.method] = route.handler
        served = [
            Route(path, self._endpoint(path, methods), methods=_methods(methods))
            for path, methods in by_path.items()
        ]
        served.append(Route(PREFIX + "/static/{name}", self._serve_static, methods=["GET"]))
        return served

    def _endpoint(
        self, path: str, methods: dict[str, Page]
    ) -> Callable[[Request], Awaitable[Response]]:
        async def endpoint(request: Request) -> Response:
            method = "GET" if request.method == "HEAD" else request.method
            return await self.visit(request, path, methods[method])

        return endpoint

    async def _serve_static(self, request: Request) -> Response:
        name = str(request.path_params["name"])
        body = self._static.get(name)
        if body is None:
            return self.plain_error(404, "no such file")
        media = _STATIC_TYPES[name[name.rfind(".") :]]
        headers = {**_SECURITY_HEADERS, "Cache-Control": "max-age=300"}
        return Response(body, media_type=media, headers=headers)

    # ------------------------------------------------------------------ visits

    async def visit(self, request: Request, path: str, page: Page) -> Response:
        """Settle who is asking (the module docstring's steps) and run ``page``."""
        started = time.perf_counter()
        connection = request.scope.get("state", {}).get(CONNECTION)
        log = self.host.log_for(connection).bind(method=request.method, path=path)
        now = self._clock()
        # A live page's refresh is not someone at work: it does not keep a session.
        session = self.sessions.find(
            request.cookies.get(COOKIE), now, touch=not request.headers.get(FRAGMENT)
        )
        opened = False
        if session is None and not path.endswith("/login"):
            session = self._automatic(connection, now)
            opened = session is not None
            if session is None:
                if request.headers.get(FRAGMENT):
                    return self.plain_error(401, "log in again")
                return RedirectResponse(PREFIX + "/login", status_code=303)
        if session is None:  # the login form, before a login
            session = self.sessions.guest(now)
        principal = None
        if session.principal is not None:
            principal = self.host.authorization.principal(session.principal)
            log = log.bind(principal=principal.name)
        visit = Visit(
            request,
            session,
            principal,
            log,
            self._api_call(request, principal, log),
            fragment=bool(request.headers.get(FRAGMENT)),
            opened=opened,
        )
        try:
            if request.method == "POST":
                self._check_origin(visit)  # before its body is read
                visit.form = await self._form(request, log)
                self._check_token(visit)
            response = await page(self, visit)
        except ApiError as exc:
            if exc.status == 401:
                return RedirectResponse(PREFIX + "/login", status_code=303)
            response = self.error_page(visit, exc.status, exc.message)
        except QueueManagerError as exc:
            status = STATUS_OF.get(error_code(exc), 500)
            response = self.error_page(visit, status, exc.message)
        except Exception:
            log.exception("http_request_failed")
            response = self.error_page(visit, 500, "internal error (see the daemon's log)")
        if opened:
            self.set_cookie(response, visit)
        return logged(response, log, started)

    def _automatic(self, connection: Any, now: float) -> ConsoleSession | None:
        """A session opened without a login: for the client certificate shown, or
        for nobody when ``auth.required`` is off; None: the login form is needed."""
        name = None if connection is None else connection.certificate_name
        if name is not None:
            return self.sessions.open(name, "certificate", now)
        if not self.host.authorization.enabled:
            return self.sessions.open(None, "none", now)
        return None

    def _api_call(
        self,
        request: Request,
        principal: Principal | None,
        log: structlog.typing.FilteringBoundLogger,
    ) -> ApiCall:
        def authorize(value: Any, need: Need) -> None:
            self.host.authorize(principal, value, need, call.log)

        call = ApiCall(request, principal, log, self.operations, authorize, self._allowed)
        return call

    async def _form(
        self, request: Request, log: structlog.typing.FilteringBoundLogger
    ) -> dict[str, str]:
        """The fields of an action's form (urlencoded, at most :data:`MAX_FORM` bytes,
        read by ``read_body``).

        Raises:
            ApiError: 413 past the bound; 400 when it is not a form, or it ended early.
        """
        kind = request.headers.get("content-type", "").partition(";")[0].strip().lower()
        if kind != "application/x-www-form-urlencoded":
            msg = "an action's body must be a form (application/x-www-form-urlencoded)"
            raise ApiError(400, "bad_request", msg)
        data = await read_body(request, MAX_FORM, log)
        try:
            fields = parse_qsl(
                data.decode("utf-8"), keep_blank_values=True, max_num_fields=_MAX_FIELDS
            )
        except (UnicodeDecodeError, ValueError):
            msg = f"the form is not UTF-8 with at most {_MAX_FIELDS} fields"
            raise ApiError(400, "bad_request", msg) from None
        return dict(fields)

    def _check_origin(self, visit: Visit) -> None:
        """An action must come from this site (``cross_site``); a login, which has
        no session and so no CSRF token yet, must also say where it comes from
        (every browser sends ``Origin`` with a form).

        Raises:
            ApiError: 403 (logged as ``console_csrf_refused``).
        """
        request = visit.request
        why = cross_site(request)
        if why is None and visit.login and "origin" not in request.headers:
            why = "a login form without Origin"
        if why is not None:
            visit.log.warning("console_csrf_refused", reason=f"another site: {why}")
            raise ApiError(403, "csrf", "refused: the form came from another site")

    def _check_token(self, visit: Visit) -> None:
        """An action after the login must carry the session's CSRF token.

        Raises:
            ApiError: 403 (logged as ``console_csrf_refused``).
        """
        if visit.login:
            return  # no session yet: a login needs a token anyway
        if not visit.session.accepts(visit.form.get("csrf")):
            visit.log.warning("console_csrf_refused", reason="missing or wrong CSRF token")
            raise ApiError(
                403,
                "csrf",
                "refused: the form's security token is missing or out of date; "
                "reload the page and try again",
            )

    # ------------------------------------------------------------------ pages

    def render(
        self,
        visit: Visit,
        template: str,
        *,
        http_status: int = 200,
        live: bool = False,
        **values: Any,
    ) -> Response:
        """``template`` with ``values``: the whole page, or only its live region on a refresh."""
        page = self._environment().get_template(template)
        notices = list(visit.session.notices) if not visit.fragment else []
        if not visit.fragment:
            visit.session.notices.clear()
        context = {
            "prefix": PREFIX,
            "visit": visit,
            "principal": visit.principal.name if visit.principal else None,
            "csrf": visit.session.csrf,
            "refresh": REFRESH_MS if live else 0,
            "notices": notices,
            "qm_name": self.sources.name,
            "version": self.sources.version,
            "login_needed": self.host.authorization.enabled,
            **values,
        }
        if visit.fragment:
            block = page.blocks["content"]
            text = "".join(block(page.new_context(context)))
        else:
            text = page.render(context)
        return HTMLResponse(text, status_code=http_status, headers=_SECURITY_HEADERS)

    def _environment(self) -> jinja2.Environment:
        """The templates (autoescaping every value), loaded at the first use."""
        if self._templates is None:
            import jinja2

            self._templates = jinja2.Environment(
                loader=jinja2.PackageLoader("qmgr.server.http.console", "templates"),
                autoescape=True,
                undefined=jinja2.StrictUndefined,
                trim_blocks=True,
                lstrip_blocks=True,
            )
            self._templates.filters.update(FILTERS)
        return self._templates

    def error_page(self, visit: Visit, status: int, message: str) -> Response:
        """A page that says why the request was refused."""
        if visit.fragment:
            return self.plain_error(status, message)
        return self.render(
            visit, "error.html", http_status=status, title="Refused", message=message
        )

    @staticmethod
    def plain_error(status: int, message: str) -> Response:
        """A short refusal (a refresh, a missing file)."""
        text = f"<p class=error>{html.escape(message)}</p>"
        return HTMLResponse(text, status_code=status, headers=_SECURITY_HEADERS)

    def set_cookie(self, response: Response, visit: Visit) -> None:
        """Give the browser the session's cookie."""
        connection = visit.request.scope.get("state", {}).get(CONNECTION)
        response.set_cookie(
            COOKIE,
            visit.session.session_id,
            path=PREFIX,
            httponly=True,
            samesite="strict",
            secure=bool(getattr(connection, "tls", False)),
        )

    def redirect(self, path: str, **query: str) -> Response:
        """See another page of the console after an action (``303``)."""
        target = PREFIX + path
        if query:
            target += "?" + urlencode(query)
        return RedirectResponse(target, status_code=303, headers=_SECURITY_HEADERS)

    # ------------------------------------------------------------------ logins

    def log_in(self, visit: Visit, token: str) -> ConsoleSession | None:
        """Open a session for the principal of ``token``; None if it is not accepted
        (counted and logged as a failed authentication)."""
        connection = visit.request.scope.get("state", {}).get(CONNECTION)
        name = self.host.token_name(token, connection, visit.log, method="console")
        if name is None:
            return None
        session = self.sessions.open(name, "token", self._clock())
        visit.log.info("console_login", principal=name)
        return session

    # ------------------------------------------------------------------ sessions

    async def expire_sessions(self) -> None:
        """Forget ended sessions every :data:`~..rates.SAMPLE_SECONDS` (a task of
        the listener's, for as long as it serves)."""
        while True:
            self.sessions.expire(self._clock())
            await trio.sleep(SAMPLE_SECONDS)

    def may_monitor(self, principal: Principal | None) -> bool:
        """Whether ``principal`` may read what ``/metrics`` shows (``auth.monitors``
        and administrators; everyone while ``auth.required`` is off): the store's
        usage, the disk, the connections and the daemon-wide rates."""
        authorization = self.host.authorization
        if not authorization.enabled:
            return True
        return principal is not None and authorization.denial(principal, None, MONITORS) is None

    def now(self) -> float:
        """The console's clock (trio's), as the rates' readings use it."""
        return self._clock()


def _methods(methods: Mapping[str, Page]) -> list[str]:
    """The methods a path answers: its own, and HEAD where it has a GET."""
    return sorted({*methods, "HEAD"} if "GET" in methods else set(methods))


def form_field(form: Mapping[str, str], name: str) -> str:
    """A field of an action's form.

    Raises:
        ApiError: 400, it is missing or empty.
    """
    value = form.get(name, "").strip()
    if not value:
        raise ApiError(400, "bad_request", f"the form must give {name}")
    return value


# ---------------------------------------------------------------------- formats


def _size(value: int | None) -> str:
    """Bytes for people (``texts.size``); empty for None."""
    return "" if value is None else size(value)


def _age(seconds: float | None) -> str:
    """A duration for people (``texts.age``); empty for None."""
    return "" if seconds is None else age(seconds)


def _rate(value: float | None) -> str:
    """A rate per second: ``12.5/s``; empty when unknown."""
    if value is None:
        return ""
    return f"{value:.1f}/s" if value < 100 else f"{value:.0f}/s"


def _when(value: Any) -> str:
    """A time (``datetime``) for people, in UTC to the second; empty for None."""
    if value is None:
        return ""
    return str(value.strftime("%Y-%m-%d %H:%M:%S UTC"))


def _unix(value: float | None) -> str:
    """Unix seconds for people; empty for None or 0 (unknown)."""
    if not value:
        return ""
    return _when(dt.datetime.fromtimestamp(value, dt.UTC))


#: The templates' filters.
FILTERS: Final[Mapping[str, Callable[..., str]]] = {
    "size": _size,
    "age": _age,
    "rate": _rate,
    "when": _when,
    "unix": _unix,
}
