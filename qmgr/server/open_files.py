"""The daemon's open-files limit (``RLIMIT_NOFILE``) against its connection bounds.

Every connection is a file descriptor, so the configured bounds
(``server.max_connections``, ``peers.max_connections`` and
``peers.max_unauthenticated``, ``http.max_connections``) only hold if the
process may open that many files and some more: the store's files, the
listeners, the log, the event loop's own, connections being refused.
:func:`descriptors_needed` says how many that is; :func:`check_open_files`,
at start-up before any listener is bound, raises the soft limit to it when
the soft limit is lower (a process may, up to its hard limit), and logs
``open_files_limit_low`` when even the hard limit is below it: past the limit
new connections would hang before any bound of the daemon is reached.
"""

from __future__ import annotations

import resource
from typing import Final

import structlog

from qmgr.config import Config

__all__ = ["RESERVED_DESCRIPTORS", "check_open_files", "descriptors_needed", "soft_limit_to_set"]

#: Descriptors kept for what is not a bounded connection: the store's files
#: (``data.mdb`` twice, ``lock.mdb``, ``store.lock``, the ballast), the
#: listeners, standard streams, the event loop's (epoll, wake-up sockets),
#: connections being refused at a bound, outgoing connection attempts.
RESERVED_DESCRIPTORS: Final = 64

_ADVICE: Final = (
    "raise the hard limit of open files (LimitNOFILE= in a systemd unit, "
    "`ulimit -n` in the shell that starts it, `docker run --ulimit nofile=N`) "
    "or lower server.max_connections, peers.max_connections, "
    "peers.max_unauthenticated or http.max_connections"
)


def descriptors_needed(config: Config) -> int:
    """File descriptors the daemon may need at once with ``config``'s bounds:
    client connections (TCP and the local socket together), peer sessions in
    each direction (``peers.max_connections`` taken, as many opened) and
    peer connections whose session is not open yet, HTTP connections (none
    when ``http.listen`` is off), and :data:`RESERVED_DESCRIPTORS`."""
    http = config.http_max_connections if config.http_listen is not None else 0
    return (
        config.max_connections
        + 2 * config.peer_max_connections
        + config.peer_max_unauthenticated
        + http
        + RESERVED_DESCRIPTORS
    )


def soft_limit_to_set(needed: int, soft: int, hard: int) -> int | None:
    """The soft limit to give the process so that it may open ``needed`` files:
    ``needed``, or the hard limit when that is lower; None when the soft limit
    is high enough already (or the hard limit allows nothing more)."""
    if soft == resource.RLIM_INFINITY or soft >= needed:
        return None
    target = needed if hard == resource.RLIM_INFINITY else min(needed, hard)
    return target if target > soft else None


def check_open_files(config: Config, log: structlog.typing.FilteringBoundLogger) -> None:
    """Raise the soft limit of open files to what ``config``'s bounds need
    (``open_files_limit_raised``), and warn (``open_files_limit_low``) when the
    hard limit keeps it lower; the daemon starts either way."""
    needed = descriptors_needed(config)
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = soft_limit_to_set(needed, soft, hard)
    refused = None
    if target is not None:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
        except (ValueError, OSError) as exc:  # not expected below the hard limit
            refused = str(exc)
        else:
            log.info("open_files_limit_raised", previous=soft, limit=target, needed=needed)
            soft = target
    if soft != resource.RLIM_INFINITY and soft < needed:
        log.warning(
            "open_files_limit_low",
            limit=soft,
            hard_limit=hard,
            needed=needed,
            advice=f"past {soft} open files new connections hang: {_ADVICE}",
            **({} if refused is None else {"error": refused}),
        )
