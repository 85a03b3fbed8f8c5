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
                   certificate, Hypercorn's HTTP/1.1 server per connection
``app``            the ASGI application (Starlette's routing): the route
                   table with each route's need, bearer tokens and client
                   certificates, ``Authorization.denial``, the responses
``api``            the JSON API (``/api/v1/...``): its routes, each making
                   client requests through ``Operations`` (the client
                   request handlers, with their needs), shaped as
                   ``qmgr --json`` shapes them (``qmgr.client.shapes``)
``metrics``        the collector: what the daemon already counts, read at
                   scrape time
``exposition``     the body of a scrape: Prometheus text or OpenMetrics by
                   the ``Accept`` header, the per-queue families written fast
``console``        the web console (``/console``): server-rendered pages,
                   login sessions, CSRF tokens, the same client requests
=================  =========================================================

:func:`http_port` puts them together for the daemon. Only this package
imports Hypercorn, Starlette, ``prometheus_client`` and Jinja2
(``tests/test_layers.py``).
"""

from __future__ import annotations

import ssl
from collections.abc import Callable

import structlog
from prometheus_client import CollectorRegistry, ProcessCollector

from qmgr.config import Config

from ..client.authorization import Authorization
from ..client.operations import Operations
from .app import HttpApp
from .console import console
from .exposition import Exposition
from .metrics import MetricsSources, QueueManagerCollector
from .port import HttpPort

__all__ = ["HttpPort", "MetricsSources", "http_port"]


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
    """The HTTP listener's handler, with its application, its metrics and (given
    the operations) its JSON API."""
    collector = QueueManagerCollector(sources)
    registry = CollectorRegistry()
    registry.register(collector)
    ProcessCollector(registry=registry)
    app = HttpApp(
        authorization=authorization,
        exposition=Exposition(registry, collector),
        stopping=stopping,
        log=log.bind(component="http"),
        operations=operations,
    )
    port = HttpPort(config, app, tls, log)
    if operations is not None:
        site = console(
            host=app,
            operations=operations,
            sources=sources,
            idle_timeout=config.http_session_timeout,
            lifetime=config.http_session_lifetime,
        )
        app.serve_console(site.starlette_routes())
        port.tasks.append(site.sample)
    return port
