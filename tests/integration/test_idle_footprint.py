"""What an idle daemon carries: a real ``qmgr serve`` (with its HTTP listener on, as
by default) imports neither the HTTP listener's libraries nor what its libraries
import and it never uses, until a first HTTP connection loads the listener's
service (``qmgr.server.http.port``, ``qmgr.deferred``). Python's ``-X importtime``
says, in the daemon's log, every module it imported."""

from __future__ import annotations

import re
import sys
from collections.abc import Callable

from helpers import DaemonProcess

#: Not imported by an idle daemon.
HEAVY = (
    "hypercorn",
    "starlette",
    "prometheus_client",
    "jinja2",
    "qmgr.server.http.service",
    "qmgr.client",
    "asyncio",
    "pdb",
    "rich.console",  # structlog's attempt at ``rich`` fails at once (it is kept out)
    "cryptography",
)
_IMPORTED = re.compile(rb"^import time:\s+\d+ \|\s+\d+ \| ( *)(\S+)$", re.MULTILINE)


class ImportTimed(DaemonProcess):
    """A daemon started as ``python -X importtime -m qmgr serve ...``."""

    def command(self) -> list[str]:
        return [sys.executable, "-X", "importtime", "-m", "qmgr", *self.arguments()]


def imported(daemon: DaemonProcess) -> set[str]:
    """The modules the daemon has imported so far."""
    return {name.decode() for _, name in _IMPORTED.findall(daemon.log_path.read_bytes())}


def loaded(names: set[str], module: str) -> bool:
    return any(name == module or name.startswith(f"{module}.") for name in names)


def test_the_http_listener_is_loaded_by_its_first_connection(
    daemon_factory: Callable[..., DaemonProcess],
) -> None:
    daemon = daemon_factory(kind=ImportTimed, launch="exec")
    idle = imported(daemon)
    assert loaded(idle, "qmgr.server.http.port")  # the listener itself is there
    assert [m for m in HEAVY if loaded(idle, m)] == []
    assert b"http_loaded" not in daemon.log_path.read_bytes()

    assert daemon.http_get("/healthz") == (200, b"ok\n")
    used = imported(daemon)
    assert all(loaded(used, m) for m in ("hypercorn", "starlette", "prometheus_client"))
    assert b'"event": "http_loaded"' in daemon.log_path.read_bytes()
    status, body = daemon.http_get("/metrics")
    assert status == 200
    assert b"qmgr_queue_messages" in body or b"qmgr_commits_total" in body
    assert daemon.http_get("/console/login")[0] == 200
