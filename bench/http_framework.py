"""The HTTP listener's framework, measured: Starlette's routing against a bare ASGI app.

Run::

    .venv/bin/python bench/http_framework.py [--seconds 3] [--runs 3]

Both applications run behind the listener as the daemon serves it
(``qmgr.server.http.port.HttpPort``: Hypercorn's HTTP/1.1 server per
connection, in a trio nursery of this process) and answer the same way:
``/healthz``, and ``/metrics`` with the daemon's exposition over a store with
a few queues, after the same authentication and authorization (a bearer
token, ``Authorization.denial``):

``starlette``
    the listener's application, ``qmgr.server.http.app.HttpApp`` (Starlette's
    ``Router``, ``Request`` and responses);
``bare``
    a hand-written ASGI callable doing the same with no framework.

A client in another process sends requests one after another on one
keep-alive connection for ``--seconds``; the table gives requests per second
and this process's CPU time per request (the server's cost, whichever process
the scheduler favours), medians over ``--runs``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import structlog
import trio
from _metrics_sources import standalone_sources
from prometheus_client import CollectorRegistry, ProcessCollector

import storage
from qmgr.config import load_config
from qmgr.core.engine import QueueManagerCore
from qmgr.core.tokens import TokenBook, hash_token
from qmgr.server.client.authorization import Authorization
from qmgr.server.client.needs import MONITORS
from qmgr.server.http.app import HttpApp
from qmgr.server.http.exposition import Exposition
from qmgr.server.http.metrics import QueueManagerCollector
from qmgr.server.http.port import HttpPort
from qmgr.server.http.service import HypercornService

TOKEN = "bench-token"

CLIENT = r"""
import http.client, sys, time
port, path, seconds, token = int(sys.argv[1]), sys.argv[2], float(sys.argv[3]), sys.argv[4]
connection = http.client.HTTPConnection("127.0.0.1", port)
headers = {"Authorization": "Bearer " + token}
count, end = 0, time.monotonic() + seconds
while time.monotonic() < end:
    connection.request("GET", path, headers=headers)
    response = connection.getresponse()
    response.read()
    assert response.status == 200, response.status
    count += 1
print(count)
"""


class BareApp:
    """The same answers as ``HttpApp``, by hand."""

    def __init__(self, authorization: Authorization, exposition: Exposition[Any]) -> None:
        self.authorization = authorization
        self.exposition = exposition
        self.on_failure = lambda peer: None

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        path = scope["path"]
        headers = dict(scope["headers"])
        status, content_type, body = 404, "text/plain; charset=utf-8", b"Not Found"
        if path == "/healthz":
            status, body = 200, b"ok\n"
        elif path == "/metrics":
            token = headers.get(b"authorization", b"").decode().partition(" ")[2]
            name = self.authorization.authenticate(token)
            principal = None if name is None else self.authorization.principal(name)
            if principal is None:
                status, body = 401, b"authenticate first\n"
            elif self.authorization.denial(principal, scope, MONITORS) is not None:
                status, body = 403, b"access denied\n"
            else:
                accept = headers.get(b"accept", b"").decode()
                body, content_type = await self.exposition.scrape(accept)
                status = 200
        await send(
            {
                "type": "http.response.start",
                "status": status,
                "headers": [
                    (b"content-type", content_type.encode()),
                    (b"content-length", str(len(body)).encode()),
                ],
            }
        )
        await send({"type": "http.response.body", "body": body})


def applications(directory: Path) -> dict[str, Callable[[], Any]]:
    store = storage.Store(directory, initial_map_size=1 << 22, durable=False)
    core = QueueManagerCore(store)
    now = time.time()
    store.commit(core.queues.system_queue_units(now), now=now)
    for name in ("send", "receive", "latency"):
        core.queues.created(store.commit([core.queues.create(name, wall=now)], now=now)[0])
    authorization = Authorization(
        core,
        enabled=True,
        admins=frozenset(),
        groups={},
        default_acl={},
        tokens=TokenBook({"prom": hash_token(TOKEN)}),
        monitors=frozenset({"prom"}),
    )
    sources = standalone_sources(store, directory, core=core, tally=authorization.tally)
    collector = QueueManagerCollector(sources)
    registry = CollectorRegistry()
    registry.register(collector)
    ProcessCollector(registry=registry)
    exposition = Exposition(registry, collector)
    log = structlog.get_logger("bench")
    return {
        "starlette": lambda: HttpApp(
            authorization=authorization, exposition=exposition, stopping=lambda: False, log=log
        ),
        "bare": lambda: BareApp(authorization, exposition),
    }


async def measure(app: Any, path: str, seconds: float) -> tuple[float, float]:
    """Requests per second and this process's CPU seconds per request."""
    config = load_config()

    async def load() -> HypercornService:
        return HypercornService(config, app)

    port = HttpPort(
        config,
        load=load,
        tally=app.authorization.tally,
        tls=None,
        log=structlog.get_logger("bench"),
    )
    async with trio.open_nursery() as nursery:
        listeners = await nursery.start(
            partial(trio.serve_tcp, port.handle_connection, 0, host="127.0.0.1")
        )
        number = listeners[0].socket.getsockname()[1]
        cpu = time.process_time()
        started = time.perf_counter()
        result = await trio.run_process(
            [sys.executable, "-c", CLIENT, str(number), path, str(seconds), TOKEN],
            capture_stdout=True,
        )
        elapsed = time.perf_counter() - started
        cpu = time.process_time() - cpu
        nursery.cancel_scope.cancel()
    count = int(result.stdout)
    return count / elapsed, cpu / count


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(30))
    with tempfile.TemporaryDirectory() as directory:
        apps = applications(Path(directory))
        figures: dict[tuple[str, str], list[tuple[float, float]]] = {}
        for _ in range(args.runs):
            for path in ("/healthz", "/metrics"):
                for name, make in apps.items():
                    figure = trio.run(measure, make(), path, args.seconds)
                    figures.setdefault((name, path), []).append(figure)
    print(f"{'application':12} {'path':10} {'requests/s':>11} {'server CPU/request':>19}")
    for (name, path), samples in figures.items():
        rate = statistics.median(rate for rate, _ in samples)
        cpu = statistics.median(cpu for _, cpu in samples)
        print(f"{name:12} {path:10} {rate:11,.0f} {cpu * 1e6:16,.0f} µs")


if __name__ == "__main__":
    main()
