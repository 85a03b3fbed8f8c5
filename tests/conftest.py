"""Fixtures shared by the whole test suite.

Sections:

* Hypothesis settings for the whole suite.
* Queue-manager daemons: the real ``qmgr serve`` in a process of its own
  (:class:`helpers.DaemonProcess`: forked from a server that imported the
  daemon once, or ``launch="exec"`` for the command line itself). ``daemon``
  is a fresh one per test (for tests that stop, kill or restart it);
  ``peers`` two fresh ones, ``qm-a`` and ``qm-b``, that peer quickly, with a
  client of each;
  ``shared_daemon`` is one per session for tests that only talk to it; they
  use ``queue_name`` for queues no other test touches.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import structlog
from helpers import PEER_FAST, DaemonProcess, Launch, Peers
from hypothesis import HealthCheck, settings

# --------------------------------------------------------------------------
# Hypothesis: no per-example deadline. A loaded CI machine can stall any one
# example past the default 200 ms; what the tests check is correctness, and
# timing belongs to bench/.
# --------------------------------------------------------------------------

settings.register_profile(
    "qmgr", deadline=None, suppress_health_check=[HealthCheck.too_slow], print_blob=True
)
settings.load_profile("qmgr")

# --------------------------------------------------------------------------
# Queue-manager daemons
# --------------------------------------------------------------------------


@pytest.fixture
def daemon_factory(tmp_path: Path) -> Iterator[Callable[..., DaemonProcess]]:
    """Start daemons in this test's temporary directory; all are stopped afterwards.

    ``daemon_factory(extra_args=[...], name="...")`` returns a started
    :class:`DaemonProcess` with its own data directory (``launch="exec"``:
    started by the command line, ``python -m qmgr serve``; ``kind``: a
    subclass of :class:`DaemonProcess` to start instead).
    """
    started: list[DaemonProcess] = []
    counter = itertools.count(1)

    def start(
        *,
        extra_args: tuple[str, ...] | list[str] = (),
        name: str = "qmgr-test",
        data_dir: Path | None = None,
        preexec: Callable[[], None] | None = None,
        launch: Launch | None = None,
        kind: type[DaemonProcess] = DaemonProcess,
    ) -> DaemonProcess:
        directory = data_dir if data_dir is not None else tmp_path / f"qm{next(counter)}"
        process = kind(directory, extra_args=extra_args, name=name, preexec=preexec, launch=launch)
        started.append(process)
        process.start()
        return process

    yield start
    for process in started:
        process.close()


@pytest.fixture
def daemon(daemon_factory: Callable[..., DaemonProcess]) -> DaemonProcess:
    """A fresh queue manager for this test alone (it may stop, kill or restart it)."""
    return daemon_factory()


@pytest.fixture
def peers(daemon_factory: Callable[..., DaemonProcess]) -> Iterator[Peers]:
    """Two fresh queue managers, ``qm-a`` then ``qm-b``, quick to reconnect and
    acknowledge (:data:`helpers.PEER_FAST`), and a client of each."""
    from qmgr.client import connect

    a = daemon_factory(name="qm-a", extra_args=PEER_FAST)
    b = daemon_factory(name="qm-b", extra_args=PEER_FAST)
    with connect(a.address) as qa, connect(b.address) as qb:
        yield Peers(a, b, qa, qb)


@pytest.fixture(scope="session")
def shared_daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DaemonProcess]:
    """One queue manager for the session; tests must use queues of their own."""
    process = DaemonProcess(tmp_path_factory.mktemp("shared") / "qm", name="qmgr-shared")
    process.start()
    try:
        yield process
    finally:
        process.close()


_queue_numbers = itertools.count(1)


@pytest.fixture
def queue_name(request: pytest.FixtureRequest) -> str:
    """A queue name no other test uses (derived from the test's name)."""
    base = request.node.name.replace("[", "-").replace("]", "").replace(",", "-")
    return f"{base[:90]}-{next(_queue_numbers)}"


@pytest.fixture
def restored_logging() -> Iterator[None]:
    """structlog's and the ``logging`` root's configuration as they were before
    the test (``qmgr.logs.configure_logging`` changes both for the process)."""
    saved = structlog.get_config()
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    yield
    structlog.configure(**saved)
    structlog.contextvars.clear_contextvars()
    root.handlers[:] = handlers
    root.setLevel(level)
