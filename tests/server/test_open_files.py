"""The open-files limit against the connection bounds (``qmgr.server.open_files``):
the arithmetic, and a real daemon started under a low limit, which raises its
soft limit or, when the hard limit is too low, says so in its log."""

from __future__ import annotations

import resource
from collections.abc import Callable

import pytest
from helpers import DaemonProcess, log_events

from qmgr.config import load_config
from qmgr.server.open_files import RESERVED_DESCRIPTORS, descriptors_needed, soft_limit_to_set

INFINITY = resource.RLIM_INFINITY


def test_the_defaults_need_more_than_the_usual_soft_limit() -> None:
    # server.max_connections, peers.max_connections in each direction,
    # peers.max_unauthenticated, http.max_connections, and what is not a bounded
    # connection.
    assert descriptors_needed(load_config()) == 1024 + 2 * 256 + 64 + 64 + RESERVED_DESCRIPTORS
    assert descriptors_needed(load_config()) > 1024


def test_without_the_http_listener_its_connections_are_not_counted() -> None:
    with_http = descriptors_needed(load_config())
    assert descriptors_needed(load_config(http_listen="")) == with_http - 64


@pytest.mark.parametrize(
    "key",
    [
        "server.max_connections",
        "peers.max_connections",
        "peers.max_unauthenticated",
        "http.max_connections",
    ],
)
def test_each_connection_bound_counts(key: str) -> None:
    default = load_config()
    section, name = key.split(".")
    attribute = {"server": "", "peers": "peer_", "http": "http_"}[section] + name
    raised = load_config(settings=[f"{key}={getattr(default, attribute) + 100}"])
    directions = 2 if key == "peers.max_connections" else 1  # taken, and opened
    assert descriptors_needed(raised) == descriptors_needed(default) + 100 * directions


@pytest.mark.parametrize(
    ("needed", "soft", "hard", "expected"),
    [
        (1472, 1024, 524288, 1472),  # raised to what is needed, not to the hard limit
        (1472, 1024, INFINITY, 1472),
        (1472, 1024, 1200, 1200),  # as far as the hard limit allows
        (1472, 1472, 524288, None),  # enough already
        (1472, 65536, 65536, None),  # more than enough: never lowered
        (1472, INFINITY, INFINITY, None),
        (1472, 1024, 1024, None),  # the hard limit allows nothing more
    ],
)
def test_the_soft_limit_to_set(needed: int, soft: int, hard: int, expected: int | None) -> None:
    assert soft_limit_to_set(needed, soft, hard) == expected


# --------------------------------------------------------------------------- a real daemon


class _AnyPorts(DaemonProcess):
    """A daemon listening on ports the kernel chooses: these tests read its process's
    limits and log, and connect to nothing."""

    def placement(self) -> list[str]:
        return [
            "--client-listen",
            "127.0.0.1:0",
            "--listen",
            "127.0.0.1:0",
            "--http-listen",
            "127.0.0.1:0",
        ]


#: The daemons' bounds: smaller than the defaults, so that the test's own
#: hard limit surely allows them.
BOUND = "server.max_connections=300"


def _open_files_limit(soft: int, hard: int | None = None) -> Callable[[], None]:
    """Run in the daemon's process before it starts: the limit it is started under."""

    def apply() -> None:
        _, current = resource.getrlimit(resource.RLIMIT_NOFILE)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, current if hard is None else hard))

    return apply


def _limits_of(daemon: DaemonProcess) -> tuple[int, int]:
    """The daemon process's soft and hard limits of open files, as the kernel has them."""
    assert daemon.process is not None
    with open(f"/proc/{daemon.process.pid}/limits", encoding="ascii") as limits:
        for line in limits:
            if line.startswith("Max open files"):
                soft, hard = line.split()[3:5]
                return int(soft), int(hard)
    raise AssertionError("no 'Max open files' line")


def test_a_daemon_under_a_low_soft_limit_raises_it_to_what_its_bounds_need(
    daemon_factory: Callable[..., DaemonProcess],
) -> None:
    needed = descriptors_needed(load_config(settings=[BOUND]))
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != INFINITY and hard < needed:
        pytest.skip(f"this process's hard limit of open files ({hard}) is below {needed}")
    daemon = daemon_factory(
        kind=_AnyPorts, extra_args=["--set", BOUND], preexec=_open_files_limit(soft=256)
    )
    assert _limits_of(daemon)[0] == needed
    [raised] = log_events(daemon, "open_files_limit_raised")
    assert (raised["previous"], raised["limit"], raised["needed"]) == (256, needed, needed)
    assert log_events(daemon, "open_files_limit_low") == []


def test_a_hard_limit_below_the_bounds_is_a_warning_that_says_what_to_do(
    daemon_factory: Callable[..., DaemonProcess],
) -> None:
    daemon = daemon_factory(
        kind=_AnyPorts, extra_args=["--set", BOUND], preexec=_open_files_limit(soft=200, hard=400)
    )
    assert _limits_of(daemon) == (400, 400)  # as far as it may go; it serves
    [low] = log_events(daemon, "open_files_limit_low")
    needed = descriptors_needed(load_config(settings=[BOUND]))
    assert (low["level"], low["limit"], low["hard_limit"], low["needed"]) == (
        "warning",
        400,
        400,
        needed,
    )
    advice = str(low["advice"])
    assert "LimitNOFILE" in advice
    assert "ulimit -n" in advice
    assert "server.max_connections" in advice
