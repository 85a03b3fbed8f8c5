"""The HTTP listener: ``/healthz``, ``/metrics``, the JSON API and the console.

Theory of operation
-------------------
An adapter of the trio layer, like ``client/`` and ``peering/``: it moves
bytes and reads what the daemon keeps, and decides nothing the core or the
authorization would. The daemon binds its socket with the other listeners
and serves it in the same nursery (``http.listen``; ``""`` turns it off);
the start-up rule of the other ports holds (``tls.check_exposure``).

=================  =========================================================
module             concern
=================  =========================================================
``port``           accepting: room (``http.max_connections``, idle ones
                   evicted first), the TLS handshake and the client
                   certificate, the service loaded at the first connection
``service``        Hypercorn's HTTP/1.1 server per connection, running the
                   application with its metrics, API and console
``sources``        what the listener reads of the daemon, and the console's
                   rate sampler, which runs from start-up
``rates``          the console's rates over the last 15 minutes (messages
                   added and removed, commits), from the sampler's readings
``app``            the ASGI application (Starlette's routing): the route
                   table with each route's need, bearer tokens and client
                   certificates, ``Authorization.denial``, the responses
``repeats``        which of the refusals a peer repeats are logged (the
                   first, then one a minute)
``request_checks`` what is checked of a request before any route (its head's
                   size, a credential in the query, a browser's Host without
                   TLS) and whether a page on another site made it
``api``            the JSON API (``/api/v1/...``): its routes, each making
                   client requests through ``Operations`` (the client
                   request handlers, with their needs), shaped as
                   ``qmgr --json`` shapes them (``qmgr.client.shapes``)
``json_body``      what the API takes as a body (JSON said and given, each
                   key once) and how its errors repeat a value (cut short)
``metrics``        the collector: what the daemon already counts, read at
                   scrape time
``exposition``     the body of a scrape: Prometheus text or OpenMetrics by
                   the ``Accept`` header, the per-queue families written fast
``console``        the web console (``/console``): server-rendered pages,
                   login sessions, CSRF tokens, the same client requests
=================  =========================================================

:func:`http_port` puts them together for the daemon. Only this package
imports Hypercorn, Starlette, ``prometheus_client`` and Jinja2
(``tests/test_layers.py``), and only ``service`` and what it imports use
them: the port loads it at its first connection, so that an idle daemon
does not carry them (``port``).
"""

from __future__ import annotations

import gc
import importlib
import importlib.util
import ssl
from collections.abc import Callable
from functools import partial

import structlog
import trio

from qmgr.config import Config

from ..client.authorization import Authorization
from ..client.operations import Operations
from .port import HttpPort, HttpService
from .rates import RateHistory
from .sources import MetricsSources, sample_rates

__all__ = ["HttpPort", "MetricsSources", "http_port"]

#: What the listener's service imports at its first connection: found (not
#: imported) at start-up, so that a broken installation fails then.
_LIBRARIES = ("hypercorn", "starlette", "prometheus_client")


def http_port(
    config: Config,
    *,
    sources: MetricsSources,
    authorization: Authorization,
    tls: ssl.SSLContext | None,
    stopping: Callable[[], bool],
    log: structlog.typing.FilteringBoundLogger,
    operations: Operations | None = None,
) -> HttpPort:
    """The HTTP listener's handler: its application, its metrics and (given the
    operations) its JSON API and console are loaded at its first connection;
    the console's rates are sampled from now."""
    missing = [name for name in _LIBRARIES if importlib.util.find_spec(name) is None]
    if missing:
        msg = f"the HTTP listener needs {', '.join(missing)}, which cannot be imported"
        raise ImportError(msg)
    history = None if operations is None else RateHistory()

    async def load() -> HttpService:
        # The libraries, imported on a worker thread (the event loop goes on
        # serving); then the service, made on the event loop's thread.
        await trio.to_thread.run_sync(importlib.import_module, f"{__name__}.service")
        from .service import http_service

        service = http_service(
            config,
            sources=sources,
            authorization=authorization,
            stopping=stopping,
            log=log,
            operations=operations,
            history=history,
        )
        # What was just loaded lives as long as the daemon, like what it made at
        # start-up: out of every garbage collection (see the daemon's start-up).
        gc.freeze()
        return service

    port = HttpPort(config, load=load, tally=authorization.tally, tls=tls, log=log)
    if history is not None:
        port.tasks.append(partial(sample_rates, sources, history, log.bind(component="http")))
    return port
