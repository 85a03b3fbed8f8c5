"""Test helpers shared by the integration and crash tests.

:class:`DaemonProcess` runs the real queue manager (``qmgr serve``) as a
process of its own on free loopback ports, with its JSON log in a file next
to the data directory, and stops, kills or restarts it on request.

Theory of operation (how a daemon is launched):

* ``launch="fork"`` (the default): the process is forked from a server
  process (:mod:`multiprocessing`'s forkserver) that imported the daemon's
  modules once, and runs ``qmgr serve`` with the same arguments, environment,
  working directory and log file as the command line would. It is a process
  of its own in every way the tests use (its own pid, store, ports and
  signals; SIGKILL is a crash; its exit status is the command's), but it
  starts in a few tens of milliseconds instead of the ~0.5-1 s Python takes
  to import the daemon.
* ``launch="exec"``: ``python -m qmgr serve ...`` as a subprocess: the
  command line itself, entry point included. Tests of the program's start
  and exit keep it (one per behaviour), as does any daemon given a
  ``preexec`` (resource limits). ``QMGR_TEST_LAUNCH=exec`` makes every
  daemon of a run start this way, to check that the fork changes nothing.

Either way :meth:`DaemonProcess.start` returns once the daemon logged
``queue_manager_started``: every listener answers and its signal handlers
are installed (a SIGTERM sent as soon as the client port answers could
otherwise find the default action still in place).

The rest are what tests do with daemons: build ``qmgr serve`` arguments
(:func:`settings`, :func:`auth_required`, :data:`PEER_FAST`,
:func:`route_args`), run the ``qmgr`` command against one (:func:`qmgr`),
read a daemon's log (:func:`log_events`), and send to, read or wait for its
queues (:func:`send_in_transaction`, :func:`prepare_sends`, :func:`drain`,
:func:`bodies`, :func:`remote_queue`, :func:`wait_until`,
:func:`wait_until_erased`).
"""

from __future__ import annotations

import functools
import http.client
import json
import multiprocessing
import os
import random
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Final, Literal, NamedTuple, Protocol, Unpack

if TYPE_CHECKING:
    from qmgr.client import QueueManager, SendOptions

#: How long a daemon may take to start accepting connections.
START_TIMEOUT = 20.0
#: How long a daemon may take to exit after SIGTERM.
STOP_TIMEOUT = 20.0

Launch = Literal["fork", "exec"]
#: How daemons start unless a test says otherwise (see the module's docstring).
DEFAULT_LAUNCH: Final[Launch] = "exec" if os.environ.get("QMGR_TEST_LAUNCH") == "exec" else "fork"
#: Modules the fork server imports once: everything ``qmgr serve`` runs, and what
#: the ``pytest`` script imports (multiprocessing runs the parent's main script
#: again in each child, as ``__mp_main__``: with this, it finds it imported).
_PRELOAD: Final = [
    "helpers",
    "qmgr.cli",
    "qmgr.server",
    # A daemon loads its HTTP listener's service at the first connection; the
    # forked ones of the tests have it already (an exec'd one, as in
    # tests/integration/test_idle_footprint.py, shows a real daemon's start).
    "qmgr.server.http.service",
    "qmgr.client",
    "qmgr.logs",
    "_pytest.config",
]


def _ephemeral_low() -> int:
    """The lowest port the kernel hands out to outgoing connections."""
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range", encoding="ascii") as ports:
            return int(ports.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


#: Ports a test daemon listens on are drawn below the ephemeral range: a port
#: that ``bind(0)`` found free may be taken by a client's outgoing connection
#: before the daemon binds it (the kernel hands those out from that range).
_LISTEN_PORTS: Final = range(10_000, max(10_001, min(_ephemeral_low(), 65_536)))
_port_draws = random.Random(os.getpid())
_handed_out: set[int] = set()


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now (below the
    ephemeral range when it can: see :data:`_LISTEN_PORTS`)."""
    for _ in range(100):
        port = _port_draws.choice(_LISTEN_PORTS)
        if port in _handed_out:  # given to a daemon that may not have bound it yet
            continue
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
        if len(_handed_out) > 5_000:
            _handed_out.clear()
        _handed_out.add(port)
        return port
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        found: int = sock.getsockname()[1]
        return found


class _Child(Protocol):
    """What :class:`DaemonProcess` needs of a started process, however it was launched."""

    @property
    def pid(self) -> int: ...

    def poll(self) -> int | None: ...

    def wait(self, timeout: float) -> int | None: ...


class _ExecChild:
    """A ``subprocess.Popen`` as a :class:`_Child`."""

    def __init__(self, popen: subprocess.Popen[bytes]) -> None:
        self.popen = popen
        self.pid = popen.pid

    def poll(self) -> int | None:
        return self.popen.poll()

    def wait(self, timeout: float) -> int | None:
        try:
            return self.popen.wait(timeout)
        except subprocess.TimeoutExpired:
            return None


class _ForkedChild:
    """A process of the fork server as a :class:`_Child` (exit statuses as Popen's:
    negative for a signal)."""

    def __init__(self, process: multiprocessing.process.BaseProcess) -> None:
        self.process = process
        assert process.pid is not None
        self.pid = process.pid
        self.code: int | None = None

    def poll(self) -> int | None:
        return self.wait(0)

    def wait(self, timeout: float) -> int | None:
        if self.code is None:
            self.process.join(timeout)
            self.code = self.process.exitcode
            if self.code is not None:
                self.process.close()  # its sentinel's file descriptor
        return self.code


@functools.cache
def _fork_server() -> multiprocessing.context.ForkServerContext:
    """The fork server's context, its modules to preload set (it starts on first use)."""
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(_PRELOAD)
    return context


def _qmgr_forked(
    argv: list[str],
    stdout_path: str,
    stderr_path: str,
    env: dict[str, str],
    cwd: str,
    prepare: Callable[[], None] | None,
) -> None:
    """In a forked child: what ``python -m qmgr ARGV`` would do (after ``prepare()``,
    if given), its output appended to these files and its input empty."""
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    for fd, path in ((1, stdout_path), (2, stderr_path)):
        out = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        os.dup2(out, fd)
        os.close(out)
    for stream in (sys.stdout, sys.stderr):
        stream.reconfigure(write_through=True)  # type: ignore[union-attr]
    os.environ.clear()
    os.environ.update(env)
    os.chdir(cwd)
    sys.argv = ["qmgr", *argv]
    if prepare is not None:
        prepare()
    from qmgr.cli import main

    main()


def _fork(
    argv: list[str], stdout: Path, stderr: Path, prepare: Callable[[], None] | None, name: str
) -> _ForkedChild:
    """Start ``qmgr ARGV`` in a child of the fork server."""
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    process = _fork_server().Process(
        target=_qmgr_forked,
        args=(argv, str(stdout), str(stderr), env, os.getcwd(), prepare),
        name=name,
        daemon=False,
    )
    process.start()
    return _ForkedChild(process)


def run_qmgr(
    *args: str, launch: Launch | None = None, timeout: float = 60.0
) -> subprocess.CompletedProcess[str]:
    """Run the ``qmgr`` command to its end, as ``subprocess.run`` would (output captured
    as text, input empty), forked or by exec (see the module's docstring)."""
    if (launch or DEFAULT_LAUNCH) == "exec":
        return subprocess.run(
            [sys.executable, "-m", "qmgr", *args],
            capture_output=True,
            stdin=subprocess.DEVNULL,
            text=True,
            timeout=timeout,
            check=False,
        )
    with tempfile.TemporaryDirectory(prefix="qmgr-run-") as directory:
        stdout, stderr = Path(directory) / "stdout", Path(directory) / "stderr"
        child = _fork(list(args), stdout, stderr, None, "qmgr")
        code = child.wait(timeout)
        if code is None:
            os.kill(child.pid, signal.SIGKILL)
            child.wait(STOP_TIMEOUT)
            raise subprocess.TimeoutExpired(["qmgr", *args], timeout)
        return subprocess.CompletedProcess(
            ["qmgr", *args],
            code,
            stdout.read_text(encoding="utf-8", errors="replace") if stdout.exists() else "",
            stderr.read_text(encoding="utf-8", errors="replace") if stderr.exists() else "",
        )


def qmgr(daemon: DaemonProcess, *args: str) -> subprocess.CompletedProcess[str]:
    """The ``qmgr`` command, a process of its own, against ``daemon``."""
    return run_qmgr("--server", daemon.address, *args)


class DaemonProcess:
    """A queue-manager daemon in a process of its own.

    Attributes:
        data_dir: the store's directory (kept across restarts).
        address: ``127.0.0.1:PORT`` of the client listener (kept across restarts).
        log_path: the daemon's stderr (JSON log lines), appended to on restart.
        launch: ``"fork"`` or ``"exec"`` (see the module's docstring).
        process: the running process (its ``pid``), or None before start.
    """

    #: Forked daemons only: called in the child before ``qmgr`` runs (to modify
    #: the daemon). A module-level function: it is sent to the fork server by name.
    prepare: Callable[[], None] | None = None

    def __init__(
        self,
        data_dir: Path,
        *,
        extra_args: Sequence[str] = (),
        name: str = "qmgr-test",
        preexec: Callable[[], None] | None = None,
        launch: Launch | None = None,
    ) -> None:
        self.data_dir = data_dir
        self.client_port = free_port()
        self.peer_port = free_port()
        #: The HTTP listener's port (``/healthz``, ``/metrics``).
        self.http_port = free_port()
        self.address = f"127.0.0.1:{self.client_port}"
        self.log_path = data_dir.parent / f"{data_dir.name}.log"
        self.extra_args = list(extra_args)
        self.name = name
        #: Run in the child before the daemon starts (to set resource limits).
        self.preexec = preexec
        self.launch: Launch = "exec" if preexec is not None else (launch or DEFAULT_LAUNCH)
        self.process: _Child | None = None

    def arguments(self) -> list[str]:
        """The arguments of ``qmgr`` that start the daemon."""
        return [
            "serve",
            "--data-dir",
            str(self.data_dir),
            *self.placement(),
            "--name",
            self.name,
            "--log-format",
            "json",
            *self.extra_args,
        ]

    def placement(self) -> list[str]:
        """The options of ``qmgr serve`` that say where this daemon listens: clients,
        peers and HTTP on loopback."""
        return [
            "--client-listen",
            self.address,
            "--listen",
            f"127.0.0.1:{self.peer_port}",
            "--http-listen",
            f"127.0.0.1:{self.http_port}",
        ]

    def command(self) -> list[str]:
        """The command line that starts the daemon."""
        return [sys.executable, "-m", "qmgr", *self.arguments()]

    def start(self, timeout: float = START_TIMEOUT) -> None:
        """Start the daemon and wait until it serves (it logged ``queue_manager_started``).

        Raises:
            AssertionError: it exited, or did not start within ``timeout``
                (the message holds its log).
        """
        assert self.process is None or self.process.poll() is not None, "already running"
        with self.log_path.open("ab") as log:
            logged = log.tell()
            if self.launch == "exec":
                popen = subprocess.Popen(
                    self.command(),
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=log,
                    env=dict(os.environ, PYTHONUNBUFFERED="1"),
                    preexec_fn=self.preexec,
                )
                self.process = _ExecChild(popen)
            else:
                self.process = _fork(
                    self.arguments(), self.log_path, self.log_path, self.prepare, self.name
                )
        deadline = time.monotonic() + timeout
        while not self._started(logged):
            code = self.process.poll()
            if code is not None:
                raise AssertionError(f"the daemon exited with status {code}:\n{self.log()}")
            if time.monotonic() > deadline:
                self.kill()
                raise AssertionError(f"the daemon did not start within {timeout} s:\n{self.log()}")
            time.sleep(0.005)

    def _started(self, offset: int) -> bool:
        """Whether the log says, after ``offset``, that the daemon serves."""
        with self.log_path.open("rb") as log:
            log.seek(offset)
            return b"queue_manager_started" in log.read()

    @property
    def running(self) -> bool:
        """True while the process is alive."""
        return self.process is not None and self.process.poll() is None

    def http_get(self, path: str, timeout: float = 30) -> tuple[int, bytes]:
        """Status and body of one GET to the daemon's HTTP listener."""
        client = http.client.HTTPConnection("127.0.0.1", self.http_port, timeout=timeout)
        try:
            client.request("GET", path)
            response = client.getresponse()
            return response.status, response.read()
        finally:
            client.close()

    def signal(self, signum: int) -> None:
        """Send a signal to the daemon (none once it exited: its pid may be another's)."""
        assert self.process is not None
        if self.process.poll() is None:
            os.kill(self.process.pid, signum)

    def wait(self, timeout: float = STOP_TIMEOUT) -> int:
        """Wait for the daemon to exit; return its status (negative: killed by that signal)."""
        assert self.process is not None
        code = self.process.wait(timeout)
        if code is None:
            self.kill()
            raise AssertionError(f"the daemon did not exit within {timeout} s:\n{self.log()}")
        return code

    def stop(self, timeout: float = STOP_TIMEOUT) -> None:
        """SIGTERM, wait, and check that the daemon exited with status 0."""
        if not self.running:
            return
        self.signal(signal.SIGTERM)
        code = self.wait(timeout)
        assert code == 0, f"the daemon exited with status {code} after SIGTERM:\n{self.log()}"

    def kill(self) -> None:
        """SIGKILL (a crash: nothing is flushed or closed) and reap the process."""
        if self.process is not None and self.process.poll() is None:
            os.kill(self.process.pid, signal.SIGKILL)
            code = self.process.wait(STOP_TIMEOUT)
            assert code is not None, f"{self.name} did not die of SIGKILL"

    def restart(self) -> None:
        """Stop (cleanly, if still running) and start again on the same ports and data."""
        self.stop()
        self.start()

    def log(self) -> str:
        """Everything the daemon wrote to stderr so far."""
        try:
            return self.log_path.read_text(encoding="utf-8", errors="replace")
        except FileNotFoundError:
            return ""

    def close(self) -> None:
        """Make sure no process is left behind (kill if a clean stop fails)."""
        try:
            self.stop()
        finally:
            self.kill()


def run_python(code: str) -> subprocess.CompletedProcess[str]:
    """``code`` run by this interpreter in a process of its own (a fresh
    interpreter: what it imports is its own), its output captured."""
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )


def log_events(daemon: DaemonProcess, event: str) -> list[dict[str, object]]:
    """The daemon's JSON log entries with this event."""
    found = []
    for line in daemon.log().splitlines():
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if isinstance(entry, dict) and entry.get("event") == event:
            found.append(entry)
    return found


def wait_until_erased(qm: QueueManager, timeout: float = 120.0) -> float:
    """Poll ``qmgr status`` until no deleted or purged queue is left to erase;
    return how long it took."""
    started = time.monotonic()
    while qm.status().erasing:
        assert time.monotonic() - started < timeout, "erasing did not finish"
        time.sleep(0.01)
    return time.monotonic() - started


def drain(address: str, queue: str) -> list[tuple[int, bytes]]:
    """Every visible message of ``queue`` as ``(lookup_id, body)``, in LookupId order
    (peeked page by page: nothing is removed)."""
    from qmgr.client import connect

    found: list[tuple[int, bytes]] = []
    with connect(address) as qm:
        after = 0
        while True:
            page = qm.peek_range(queue, after=after, max=1000)
            if not page:
                return found
            found.extend((m.lookup_id, m.body) for m in page)
            after = page[-1].lookup_id


def wait_until(predicate: Callable[[], bool], timeout: float) -> None:
    """Poll ``predicate`` until it holds; fail after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


def settings(*assignments: str) -> list[str]:
    """``qmgr serve`` arguments that set each ``KEY=VALUE`` of ``assignments``."""
    return [argument for assignment in assignments for argument in ("--set", assignment)]


def auth_required(
    tokens: Mapping[str, str] | None = None, *, admins: Sequence[str] = ()
) -> list[str]:
    """``qmgr serve`` arguments: clients must authenticate (with these ``name: token``
    pairs, if given), ``admins`` are administrators, nobody has rights by default."""
    from qmgr.core.tokens import hash_token

    assignments = ["auth.required=true"]
    if tokens is not None:
        hashes = ", ".join(f'{name} = "{hash_token(token)}"' for name, token in tokens.items())
        assignments.append(f"auth.tokens={{ {hashes} }}")
    if admins:
        assignments.append(f"auth.admins={json.dumps(list(admins))}")
    assignments.append("auth.default_acl={}")
    return settings(*assignments)


#: ``qmgr serve`` arguments that make peering quick to reconnect and acknowledge.
PEER_FAST: Final = tuple(
    settings(
        "peers.retry_initial=0.05",
        "peers.retry_max=0.5",
        "peers.order_ack_delay=0.02",
        "peers.resend_intervals=[1.0]",
    )
)

#: Every queue right, as the CLI and the configuration name it (``full`` aside).
RIGHTS: Final = (
    "send",
    "receive",
    "peek",
    "purge",
    "delete",
    "set-properties",
    "get-properties",
    "change-permissions",
)


class Peers(NamedTuple):
    """Two queue managers that peer (the ``peers`` fixture), and a client of each."""

    a: DaemonProcess
    b: DaemonProcess
    qa: QueueManager
    qb: QueueManager


def route_args(destination_port: int, hop_port: int) -> list[str]:
    """``qmgr serve`` arguments that send messages for ``127.0.0.1:destination_port``
    through ``127.0.0.1:hop_port``."""
    return settings(f'routes."127.0.0.1:{destination_port}"="127.0.0.1:{hop_port}"')


#: ``qmgr serve`` arguments that make a queue manager a router (it stores and
#: forwards what is addressed to others).
ROUTER: Final = tuple(settings("peers.router=true"))


def depth(qm: QueueManager, queue: str) -> int:
    """How many messages a peek of ``queue`` shows (the visible ones, up to 1000)."""
    return len(qm.peek_range(queue))


def bodies(qm: QueueManager, queue: str) -> list[bytes]:
    """The bodies a peek of ``queue`` shows (the visible ones, up to 1000), in order."""
    return [message.body for message in qm.peek_range(queue)]


def outgoing_settled(qm: QueueManager) -> bool:
    """True when ``qm`` has outgoing queues and none holds a message waiting or
    unacknowledged."""
    outgoing = qm.outgoing()
    return bool(outgoing) and all(q.waiting == 0 and q.unacknowledged == 0 for q in outgoing)


def remote_queue(daemon: DaemonProcess, queue: str) -> str:
    """The direct format name of ``queue`` on ``daemon``, as another queue manager sends to it."""
    return f"DIRECT=TCP:127.0.0.1:{daemon.peer_port}\\private$\\{queue}"


def send_in_transaction(
    qm: QueueManager, destination: str, body: bytes, **options: Unpack[SendOptions]
) -> None:
    """Send one message in a transaction of its own, committed."""
    with qm.begin() as tx:
        tx.send(destination, body, **options)
        tx.commit()


def commit_batches(qm: QueueManager, destination: str, first: int, count: int) -> list[bytes]:
    """Commit transactions ``first`` .. ``first + count - 1`` to ``destination``, each
    of one to three messages ``b"T-I"`` (the transaction's and the message's
    numbers); return the bodies in commit order."""
    bodies: list[bytes] = []
    for number in range(first, first + count):
        with qm.begin() as tx:
            for part in range(1 + number % 3):
                body = f"{number}-{part}".encode()
                tx.send(destination, body)
                bodies.append(body)
            tx.commit()
    return bodies


def prepare_sends(qm: QueueManager, queue: str, xids: Sequence[str]) -> None:
    """Leave a prepared transaction (in doubt) per xid, each with a send of its
    xid (as the body) to ``queue``."""
    for xid in xids:
        tx = qm.begin(xid=xid)
        tx.send(queue, xid.encode())
        tx.prepare()
