"""Network namespaces for a fleet of queue managers: a host of its own for each, on bridges.

Theory of operation
-------------------
:class:`Namespaces` gives each queue manager a network namespace of its own
(its own loopback, its own port 1801, its own addresses), joined to one or
more *segments*: Linux bridges in the root namespace, one per LAN. A host's
interfaces are veth pairs, ``eth0``, ``eth1``, ... inside its namespace and
the other end on the segment's bridge. The root namespace (the test
process, its fault proxies and forwarders) has an address on each segment,
and forwards nothing between them (nothing routes through it: no host has a
default route), so hosts on two segments reach each other only through a
host attached to both: a gate, which relays as a queue manager, not as an
IP router.

* A partition is an interface taken down inside its namespace
  (:meth:`Namespaces.set_link`): packets are dropped both ways, open TCP
  connections hang until a timeout notices, connections are refused by
  nothing (a SYN goes unanswered); taking it up again restores its routes.
* Every name this module makes starts with the run's tag
  (:func:`run_tag`): ``qmf``, the creating process's pid in base 36 and one
  random letter, so two runs never share a name, and :func:`sweep_stale`
  can tell the leftovers of a run whose process is gone (a killed pytest)
  and remove them, with the processes still running inside them
  (:func:`sweep_stale_directories` does the same for a fleet's socket
  directory and the daemons listening there, on loopback).
* The ``ip`` commands of one step run as one ``ip -batch``; :meth:`Namespaces.close`
  is idempotent and goes on past errors (``-force``), so a finalizer can
  always call it.

:func:`enter_namespace` moves the calling process into a namespace (for a
daemon forked from the test's fork server); ``ip netns exec`` does it for a
command line. :func:`available` says whether namespaces can be used here
(root, ``ip``, and a namespace that can be made).
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import ipaddress
import json
import os
import random
import re
import shutil
import signal
import string
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

__all__ = [
    "Namespaces",
    "Segment",
    "available",
    "enter_namespace",
    "free_subnet",
    "namespace_path",
    "run_tag",
    "sweep_stale",
    "sweep_stale_directories",
]

#: Every name made here starts with this, then the rest of the run's tag.
PREFIX: Final = "qmf"
#: Digits of the creating pid in base 36 in a tag (4,194,304, Linux's largest pid, takes 5).
_PID_DIGITS: Final = 5
#: The names made here: a tag (the pid, a letter), then a bridge, a veth or a namespace.
_OURS: Final = re.compile(rf"{PREFIX}([0-9a-z]{{{_PID_DIGITS}}})[a-z](b\d+|h\d+[xy]\d+|-.+)")
_BASE36: Final = string.digits + string.ascii_lowercase
#: setns(2)'s flag for a network namespace.
_CLONE_NEWNET: Final = 0x40000000
#: Where ``ip netns add`` mounts a namespace.
_NETNS_DIR: Final = "/run/netns"


def _ip() -> str:
    found = shutil.which("ip")
    if found is None:
        raise FileNotFoundError("the ip command (iproute2) is not on the PATH")
    return found


def _run(args: list[str], *, stdin: str | None = None, check: bool = True) -> str:
    """``ip ARGS`` (with ``stdin`` for a batch); its output. Raises with ip's words."""
    done = subprocess.run(
        [_ip(), *args], input=stdin, capture_output=True, text=True, timeout=60, check=False
    )
    if check and done.returncode != 0:
        raise RuntimeError(f"ip {' '.join(args)} failed: {done.stderr.strip()}\n{stdin or ''}")
    return done.stdout


def _batch(lines: list[str], *, netns: str | None = None, force: bool = False) -> None:
    """Run ``lines`` as one ``ip -batch`` (in ``netns``, if given)."""
    if not lines:
        return
    args = (["-n", netns] if netns else []) + (["-force"] if force else []) + ["-batch", "-"]
    _run(args, stdin="\n".join(lines) + "\n", check=not force)


def _base36(number: int, width: int) -> str:
    digits = ""
    while number:
        number, digit = divmod(number, 36)
        digits = _BASE36[digit] + digits
    return digits.rjust(width, "0")


def run_tag() -> str:
    """A tag for this run's names: ``qmf``, this pid in base 36 (5 digits), a random letter."""
    return f"{PREFIX}{_base36(os.getpid(), _PID_DIGITS)}{random.choice(string.ascii_lowercase)}"


def _tag_pid(name: str) -> int | None:
    """The pid in a name made here (None: not such a name)."""
    found = _OURS.fullmatch(name)
    return None if found is None else int(found.group(1), 36)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def namespace_path(name: str) -> str:
    """The file of namespace ``name`` (what :func:`enter_namespace` takes)."""
    return f"{_NETNS_DIR}/{name}"


def enter_namespace(path: str) -> None:
    """Move the calling process into the network namespace of file ``path`` (setns(2))."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        setns = getattr(os, "setns", None)  # Python 3.12
        if setns is not None:
            setns(fd, _CLONE_NEWNET)
            return
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.setns(fd, _CLONE_NEWNET) != 0:
            errno = ctypes.get_errno()
            raise OSError(errno, f"setns({path}): {os.strerror(errno)}")
    finally:
        os.close(fd)


def _namespaces() -> list[str]:
    return [line.split()[0] for line in _run(["netns", "list"]).splitlines() if line.strip()]


def _links() -> list[str]:
    names = []
    for line in _run(["-o", "link", "show"]).splitlines():
        name = line.split(":")[1].strip().split("@")[0]
        names.append(name)
    return names


def sweep_stale() -> list[str]:
    """Remove the namespaces and bridges of runs whose process is gone (SIGKILL to the
    processes still inside those namespaces first); the names removed."""
    removed = []
    for name in _namespaces():
        pid = _tag_pid(name)
        if pid is None or _alive(pid):
            continue
        for line in _run(["netns", "pids", name], check=False).split():
            with contextlib.suppress(ValueError, ProcessLookupError):
                os.kill(int(line), signal.SIGKILL)
        _run(["netns", "del", name], check=False)
        removed.append(name)
    for name in _links():
        pid = _tag_pid(name)
        if pid is not None and not _alive(pid):
            _run(["link", "del", name], check=False)
            removed.append(name)
    return removed


def _listeners(paths_under: str) -> set[int]:
    """Processes holding a Unix-domain socket bound under ``paths_under`` (this namespace)."""
    inodes = set()
    for line in Path("/proc/net/unix").read_text().splitlines()[1:]:
        fields = line.split()
        if len(fields) >= 8 and fields[7].startswith(paths_under):
            inodes.add(f"socket:[{fields[6]}]")
    found = set()
    for fd_dir in Path("/proc").glob("[0-9]*/fd"):
        with contextlib.suppress(OSError):
            if any(os.readlink(fd) in inodes for fd in fd_dir.iterdir()):
                found.add(int(fd_dir.parent.name))
    return found


def sweep_stale_directories(parent: Path) -> list[str]:
    """Remove the directories under ``parent`` named by runs whose process is gone (a
    fleet's Unix-domain sockets), SIGKILLing the processes still listening on them (the
    daemons of a fleet on loopback that a killed run left behind); the names removed."""
    removed = []
    for directory in parent.iterdir():
        pid = _tag_pid(directory.name)
        if pid is None or _alive(pid) or not directory.is_dir():
            continue
        for orphan in _listeners(f"{directory}/"):
            with contextlib.suppress(ProcessLookupError):
                os.kill(orphan, signal.SIGKILL)
        shutil.rmtree(directory, ignore_errors=True)
        removed.append(directory.name)
    return removed


@functools.cache
def available() -> bool:
    """Whether this process can make network namespaces: root, ``ip``, and a probe works."""
    if os.geteuid() != 0 or shutil.which("ip") is None:
        return False
    probe = f"{run_tag()}-probe"
    try:
        _run(["netns", "add", probe])
    except (RuntimeError, OSError, subprocess.SubprocessError):
        return False
    _run(["netns", "del", probe], check=False)
    return True


def free_subnet(exclude: frozenset[int] = frozenset()) -> ipaddress.IPv4Network:
    """A 10.X.0.0/16 that no route of the root namespace touches (X from 64 to 250)."""
    used = []
    for line in _run(["-4", "route", "show", "table", "all"]).splitlines():
        target = line.split()[0] if line.split() else ""
        if target[:1].isdigit():
            with contextlib.suppress(ValueError):
                used.append(ipaddress.ip_network(target, strict=False))
    candidates = [x for x in range(64, 251) if x not in exclude]
    random.shuffle(candidates)
    for second in candidates:
        network = ipaddress.IPv4Network(f"10.{second}.0.0/16")
        if not any(network.overlaps(other) for other in used if other.prefixlen > 0):
            return network
    raise RuntimeError("no free 10.X.0.0/16 for the fleet's segments")


@dataclass(frozen=True, slots=True)
class Segment:
    """One LAN: a bridge, and the root namespace's address on it (``10.1.2.254/24``)."""

    name: str
    bridge: str
    root_address: ipaddress.IPv4Interface


@dataclass(slots=True)
class _Host:
    namespace: str
    interfaces: list[str] = field(default_factory=list)


class Namespaces:
    """Bridges and namespaces made for one run (see the module's docstring).

    Args:
        tag: the run's tag (:func:`run_tag`); every name starts with it.
    """

    def __init__(self, tag: str) -> None:
        self.tag = tag
        self.segments: dict[str, Segment] = {}
        self.hosts: dict[str, _Host] = {}
        self._closed = False

    def add_segment(self, name: str, root_address: str) -> Segment:
        """A bridge for LAN ``name``, up, with the root namespace at ``root_address`` (CIDR)."""
        bridge = f"{self.tag}b{len(self.segments)}"
        segment = Segment(name, bridge, ipaddress.IPv4Interface(root_address))
        self.segments[name] = segment
        _batch(
            [
                f"link add {bridge} type bridge",
                f"link set {bridge} up",
                f"addr add {root_address} dev {bridge}",
            ]
        )
        return segment

    def add_hosts(self, hosts: dict[str, list[tuple[str, str]]]) -> None:
        """A namespace per host, each ``name: [(segment, "10.1.2.3/24"), ...]``: the host
        gets ``eth0``, ``eth1``, ... on those segments at those addresses, and its loopback."""
        root: list[str] = []
        inside: dict[str, list[str]] = {}
        for name, attachments in hosts.items():
            number = len(self.hosts)
            host = _Host(f"{self.tag}-{name}")
            self.hosts[name] = host
            root.append(f"netns add {host.namespace}")
            lines = inside.setdefault(host.namespace, ["link set lo up"])
            for index, (segment_name, address) in enumerate(attachments):
                segment = self.segments[segment_name]
                outer, inner = f"{self.tag}h{number}x{index}", f"{self.tag}h{number}y{index}"
                root += [
                    f"link add {outer} type veth peer name {inner}",
                    f"link set {inner} netns {host.namespace}",
                    f"link set {outer} master {segment.bridge}",
                    f"link set {outer} up",
                ]
                interface = f"eth{index}"
                lines += [
                    f"link set {inner} name {interface}",
                    f"addr add {address} dev {interface}",
                    f"link set {interface} up",
                ]
                host.interfaces.append(interface)
        _batch(root)
        for namespace, lines in inside.items():
            _batch(lines, netns=namespace)

    def namespace(self, host: str) -> str:
        """The namespace name of ``host``."""
        return self.hosts[host].namespace

    def set_link(self, host: str, index: int, *, up: bool) -> None:
        """Take interface ``eth<index>`` of ``host`` down (a partition) or up again."""
        namespace = self.hosts[host].namespace
        _run(["-n", namespace, "link", "set", f"eth{index}", "up" if up else "down"])

    def link_bytes(self, host: str, index: int) -> int:
        """Bytes received and sent so far on ``eth<index>`` of ``host``."""
        namespace = self.hosts[host].namespace
        shown = json.loads(_run(["-n", namespace, "-s", "-j", "link", "show", f"eth{index}"]))
        stats = shown[0]["stats64"]
        return int(stats["rx"]["bytes"]) + int(stats["tx"]["bytes"])

    def pids(self, host: str) -> list[int]:
        """The processes in ``host``'s namespace."""
        out = _run(["netns", "pids", self.hosts[host].namespace], check=False)
        return [int(word) for word in out.split()]

    def close(self) -> None:
        """Delete every namespace and bridge of this run (their veths go with them);
        errors are ignored, and a second call does nothing."""
        if self._closed:
            return
        self._closed = True
        lines = [f"netns del {host.namespace}" for host in self.hosts.values()]
        lines += [f"link del {segment.bridge}" for segment in self.segments.values()]
        _batch(lines, force=True)
