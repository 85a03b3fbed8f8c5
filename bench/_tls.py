"""TLS for the benchmarks: a throw-away deployment CA, the daemons' arguments, and
the client side every benchmark connection uses.

``enable(directory)`` makes a CA with ``qmgr.certs``, a queue manager
certificate for 127.0.0.1 (used by every daemon of the run, on both ports)
and a client certificate; from then on :func:`connect_to` and
:func:`open_to` connect over TLS with that client certificate, and
:func:`daemon_args` gives what ``qmgr serve`` needs to speak TLS and to
require it (``auth.required``), as a production deployment would.
``enable_in(workdir)`` does the same in a run's work directory and gives the
directory for the stores of its run with TLS.
"""

from __future__ import annotations

import ssl
from contextlib import AbstractAsyncContextManager
from pathlib import Path

from qmgr.certs import init_ca, issue
from qmgr.client import AsyncQueueManager, QueueManager, connect, open_client, tls_context

_context: ssl.SSLContext | None = None
_args: list[str] = []


def enable(directory: Path) -> None:
    """Make the certificates in ``directory`` and use TLS from now on."""
    global _context, _args
    ca = init_ca(directory).cert
    qm = issue(directory, "bench-qm", kind="qm", hosts=("127.0.0.1",))
    client = issue(directory, "bench-client", kind="client")
    _context = tls_context(ca, certificate=client.cert, key=client.key)
    _args = [
        f"--set=tls.certificate={qm.cert}",
        f"--set=tls.key={qm.key}",
        f"--set=tls.ca={ca}",
        "--set=auth.required=true",
    ]


def enable_in(workdir: Path) -> Path:
    """:func:`enable` with the certificates in ``workdir/pki``; return ``workdir/tls``
    (made), for the stores of the run with TLS."""
    enable(workdir / "pki")
    stores = workdir / "tls"
    stores.mkdir()
    return stores


def disable() -> None:
    """Plain TCP from now on."""
    global _context, _args
    _context, _args = None, []


def enabled() -> bool:
    return _context is not None


def daemon_args() -> list[str]:
    """The ``qmgr serve`` arguments of the current mode (none for plain TCP)."""
    return list(_args)


def connect_to(address: str) -> QueueManager:
    """A blocking client of ``address`` in the current mode."""
    return connect(address, tls=_context)


def open_to(address: str) -> AbstractAsyncContextManager[AsyncQueueManager]:
    """A trio client of ``address`` in the current mode."""
    return open_client(address, tls=_context)
