"""The web console: a queue manager's pages in a browser, served by the daemon.

Theory of operation
-------------------
Server-rendered HTML under ``/console`` on the HTTP listener, with no
build step: Jinja2 templates (``templates/``), one stylesheet and one short
script (``static/``) that refreshes the live part of a page every two
seconds. Nothing comes from another site.

=============  ==============================================================
module         concern
=============  ==============================================================
``site``       the routes, the session of each request (cookie, login,
               CSRF), rendering, refusals
``sessions``   the sessions kept on the server, with their expiry (sans-IO)
``pages``      what a person reads: overview, queues, a queue, a message,
               dead letters, outgoing and incoming, transactions, lists
``actions``    what a person does: log in and out, purge, move back,
               pause/resume/purge an outgoing queue, commit/abort in doubt
=============  ==============================================================

Every page and action makes client requests through the same handlers and
the same authorization as the client port and the JSON API. The rates the
pages show are those of the listener's history (``..rates``), sampled from
start-up (``..sources``), so that they cover the last 15 minutes even when
the console is first opened later.
:data:`CONSOLE_ROUTES` is the table of routes; :func:`console` makes the
console for the HTTP application.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

import trio

from wire import client as cf

from ...client.operations import Operations
from ..app import HttpApp
from ..rates import RateHistory
from ..sources import MetricsSources
from . import actions, pages
from .sessions import ConsoleSessions
from .site import PREFIX, Console, ConsoleRoute

__all__ = ["CONSOLE_REQUESTS", "CONSOLE_ROUTES", "PREFIX", "Console", "console"]

#: Every route of the console.
CONSOLE_ROUTES: Final = (
    ConsoleRoute("GET", "", pages.overview),
    ConsoleRoute("GET", "/queues", pages.queues),
    ConsoleRoute("GET", "/queue", pages.queue),
    ConsoleRoute("GET", "/queue/purge", pages.purge_confirmation),
    ConsoleRoute("POST", "/queue/purge", actions.purge),
    ConsoleRoute("GET", "/message", pages.message),
    ConsoleRoute("GET", "/message/body", pages.message_body),
    ConsoleRoute("GET", "/dead-letters", pages.dead_letters),
    ConsoleRoute("POST", "/dead-letters/move", actions.move_back),
    ConsoleRoute("GET", "/outgoing", pages.outgoing),
    ConsoleRoute("GET", "/outgoing/purge", pages.outgoing_purge_confirmation),
    ConsoleRoute("POST", "/outgoing/control", actions.control_outgoing),
    ConsoleRoute("POST", "/outgoing/purge", actions.control_outgoing),
    ConsoleRoute("GET", "/transactions", pages.transactions),
    ConsoleRoute("POST", "/transactions/resolve", actions.resolve),
    ConsoleRoute("GET", "/lists", pages.lists),
    ConsoleRoute("GET", "/login", actions.login_form),
    ConsoleRoute("POST", "/login", actions.login),
    ConsoleRoute("POST", "/logout", actions.log_out),
)

#: The client requests the console's pages and actions make.
CONSOLE_REQUESTS: Final[tuple[type[object], ...]] = (
    cf.GetStatus,
    cf.ListQueues,
    cf.PeekRange,
    cf.MeasureRange,
    cf.PurgeQueue,
    cf.MoveMessages,
    cf.GetPermissions,
    cf.TraceMessage,
    cf.ListOutgoing,
    cf.GetRouting,
    cf.ControlOutgoing,
    cf.ListTransactions,
    cf.Resolve,
    cf.GetLists,
)


def console(
    *,
    host: HttpApp,
    operations: Operations,
    sources: MetricsSources,
    idle_timeout: float,
    lifetime: float,
    history: RateHistory | None = None,
    clock: Callable[[], float] = trio.current_time,
) -> Console:
    """The console, with its sessions (``http.session_timeout``, ``http.session_lifetime``)
    and the rates of ``history`` (a new one if None)."""
    return Console(
        host=host,
        operations=operations,
        sources=sources,
        sessions=ConsoleSessions(idle_timeout=idle_timeout, lifetime=lifetime),
        routes=CONSOLE_ROUTES,
        allowed=CONSOLE_REQUESTS,
        history=RateHistory() if history is None else history,
        clock=clock,
    )
