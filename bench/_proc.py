"""What ``/proc`` says about a process: resident memory, file descriptors, TCP connections.

* :func:`memory`: ``VmRSS`` and ``RssAnon`` from ``/proc/PID/status`` and
  ``Pss`` from ``/proc/PID/smaps_rollup`` (shared pages divided among the
  processes that map them), in KiB;
* :func:`descriptors`: open file descriptors;
* :func:`tcp_connections`: established TCP connections the process holds
  (its sockets' inodes looked up in ``/proc/PID/net/tcp`` and ``tcp6``,
  which show the process's own network namespace). A queue manager whose
  clients use its Unix-domain socket holds TCP connections only to peers:
  that count is its peer sessions.
"""

from __future__ import annotations

import contextlib
import os
import re
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Sample", "descriptors", "memory", "sample", "tcp_connections"]

_ESTABLISHED = "01"


def memory(pid: int) -> tuple[int, int, int]:
    """(VmRSS, RssAnon, Pss) of ``pid`` in KiB."""
    status = Path(f"/proc/{pid}/status").read_text()
    rss = int(re.search(r"VmRSS:\s+(\d+)", status).group(1))  # type: ignore[union-attr]
    anon = int(re.search(r"RssAnon:\s+(\d+)", status).group(1))  # type: ignore[union-attr]
    rollup = Path(f"/proc/{pid}/smaps_rollup").read_text()
    pss = int(re.search(r"^Pss:\s+(\d+)", rollup, re.MULTILINE).group(1))  # type: ignore[union-attr]
    return rss, anon, pss


def _socket_inodes(pid: int) -> set[str]:
    inodes = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        with contextlib.suppress(OSError):
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
            if target.startswith("socket:["):
                inodes.add(target[8:-1])
    return inodes


def descriptors(pid: int) -> int:
    """Open file descriptors of ``pid``."""
    return len(os.listdir(f"/proc/{pid}/fd"))


def tcp_connections(pid: int) -> int:
    """Established TCP connections held by ``pid``."""
    inodes = _socket_inodes(pid)
    count = 0
    for table in ("tcp", "tcp6"):
        with contextlib.suppress(OSError):
            for line in Path(f"/proc/{pid}/net/{table}").read_text().splitlines()[1:]:
                fields = line.split()
                if fields[3] == _ESTABLISHED and fields[9] in inodes:
                    count += 1
    return count


@dataclass(frozen=True, slots=True)
class Sample:
    """One process at one moment (memory in KiB)."""

    rss: int
    anon: int
    pss: int
    fds: int
    sessions: int


def sample(pid: int) -> Sample:
    """Everything this module reads, for ``pid``."""
    rss, anon, pss = memory(pid)
    return Sample(rss, anon, pss, descriptors(pid), tcp_connections(pid))
