"""What every command shares (``qmgr/cli/common.py``): the connection, errors and output."""

from __future__ import annotations

import contextlib
import json
import socket
import ssl
import struct
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import click
import pytest
from click.testing import CliRunner
from fake_daemon import FakeDaemon
from helpers import DaemonProcess, free_port
from rich.table import Table

from qmgr.certs import init_ca, issue
from qmgr.cli import cli, common

from .kit import ok, run


def test_nothing_listening_is_an_error_with_a_hint() -> None:
    result = run(None, "--server", f"127.0.0.1:{free_port()}", "status")
    assert result.exit_code == 1
    error, hint = result.stderr.splitlines()
    assert error.startswith("error: cannot connect to the queue manager at 127.0.0.1:")
    assert hint.startswith("hint: is the queue manager running?")
    assert "TLS" not in hint  # nothing took the connection: not a TLS port either


def test_no_socket_file_is_an_error_with_a_hint(tmp_path: Path) -> None:
    result = run(None, "--server", f"unix:{tmp_path / 'qmgr.sock'}", "status")
    assert result.exit_code == 1
    error, hint = result.stderr.splitlines()
    assert error.endswith("qmgr.sock: no such file or directory")
    assert hint.startswith("hint: is the queue manager running?")


def test_a_name_that_does_not_resolve_is_said_without_a_hint() -> None:
    result = run(None, "--server", "qm.invalid:1802", "status")  # .invalid never resolves
    assert result.exit_code == 1
    [error] = result.stderr.splitlines()  # nothing about a daemon that may not run, or TLS
    assert error.startswith("error: cannot connect to the queue manager at qm.invalid:1802: ")


@contextmanager
def listener(answer: Callable[[socket.socket], None]) -> Iterator[str]:
    """The address of a port that ``answer``s each connection it accepts, once
    the client has written (a reset before that could reach the client's
    connect itself, which says nothing about TLS)."""
    with socket.create_server(("127.0.0.1", 0)) as server:

        def serve() -> None:
            with contextlib.suppress(OSError):
                while True:
                    connection, _ = server.accept()
                    with contextlib.suppress(OSError), connection:
                        connection.settimeout(5)
                        connection.recv(4096)
                        answer(connection)

        thread = threading.Thread(target=serve, daemon=True)
        thread.start()
        yield f"127.0.0.1:{server.getsockname()[1]}"
        server.shutdown(socket.SHUT_RDWR)
    thread.join(5)


def resetting_listener() -> contextlib.AbstractContextManager[str]:
    """The address of a port that resets each connection, as a TLS port does to
    a client that speaks plain text to it."""

    def reset(connection: socket.socket) -> None:
        connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))

    return listener(reset)


def plain_listener() -> contextlib.AbstractContextManager[str]:
    """The address of a port that answers in plain bytes, not in TLS, and closes
    each connection once the client has (a reset could overtake the bytes)."""

    def answer(connection: socket.socket) -> None:
        connection.sendall(bytes(16))
        connection.shutdown(socket.SHUT_WR)
        while connection.recv(4096):
            pass

    return listener(answer)


def test_a_port_that_resets_plain_tcp_hints_at_tls(tmp_path: Path) -> None:
    with resetting_listener() as address:
        plain = run(None, "--server", address, "status")
        init_ca(tmp_path)
        secure = run(None, "--server", address, "--tls-ca", str(tmp_path / "ca.crt"), "status")
    assert plain.exit_code == 1
    error, hint = plain.stderr.splitlines()
    assert error.startswith("error: "), error
    assert hint == (
        "hint: its client port may require TLS: connect with "
        "`qmgr --tls-ca CA.pem COMMAND ...` (or QMGR_TLS_CA)."
    ), plain.stderr  # something took the connection: no "is it running?"
    assert secure.exit_code == 1
    [error] = secure.stderr.splitlines()  # TLS was asked for, and something answered
    assert error.startswith("error: "), error


@contextmanager
def tls_listener(cert: Path, key: Path) -> Iterator[str]:
    """The address of a TLS port serving ``cert``, which ends each connection
    after its handshake (a client that does not trust it fails in it)."""
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert, key)
    with socket.create_server(("127.0.0.1", 0)) as server:

        def serve() -> None:
            with contextlib.suppress(OSError):
                while True:
                    connection, _ = server.accept()
                    connection.settimeout(5)
                    with contextlib.suppress(OSError), connection:
                        context.wrap_socket(connection, server_side=True).close()

        thread = threading.Thread(target=serve, daemon=True)
        thread.start()
        yield f"127.0.0.1:{server.getsockname()[1]}"
        server.shutdown(socket.SHUT_RDWR)
    thread.join(5)


def test_tls_failures_are_said_without_asking_whether_the_daemon_runs(tmp_path: Path) -> None:
    """Something answered: a plain port to TLS (said to speak none), a
    certificate for another name or from another CA (the error says it all)."""
    ca = init_ca(tmp_path / "ca")
    elsewhere = issue(tmp_path / "ca", "qm", hosts=["qm.example"], out_dir=tmp_path / "qm")
    with plain_listener() as address:
        plain = run(None, "--server", address, "--tls-ca", str(ca.cert), "status")
    assert plain.exit_code == 1
    error, hint = plain.stderr.splitlines()
    assert error.endswith("TLS handshake failed: WRONG_VERSION_NUMBER"), error
    assert hint == (
        "hint: the port does not speak TLS: it is not a client port with TLS on "
        "(tls.clients), or not the queue manager's client port at all."
    )
    other_ca = init_ca(tmp_path / "other")
    with tls_listener(elsewhere.cert, elsewhere.key) as address:
        mismatch = run(None, "--server", address, "--tls-ca", str(ca.cert), "status")
        untrusted = run(None, "--server", address, "--tls-ca", str(other_ca.cert), "status")
    for result in (mismatch, untrusted):
        assert result.exit_code == 1
        [error] = result.stderr.splitlines()
        assert "its certificate is not trusted" in error, error


def test_the_unix_socket_never_takes_tls_options(
    daemon_factory: Callable[..., DaemonProcess], tmp_path: Path
) -> None:
    """``QMGR_TLS_*``, set for the TCP ports, do not apply to ``unix:PATH``, which
    never uses TLS; the same options on the command line are noted, not applied."""
    path = tmp_path / "run" / "qmgr.sock"
    daemon_factory(extra_args=["--set", f"server.unix_socket={path}"])
    ca = init_ca(tmp_path / "ca")
    client = issue(tmp_path / "ca", "alice", kind="client", out_dir=tmp_path / "alice")
    env = {"QMGR_TLS_CA": str(ca.cert), "QMGR_TLS_CERT": str(client.cert)}
    env |= {"QMGR_TLS_KEY": str(client.key), "QMGR_SERVER": f"unix:{path}"}
    runner = CliRunner()
    quiet = ok(runner.invoke(cli, ["status", "--json"], env=env))
    assert quiet.stderr == ""
    given = ok(
        run(None, "--server", f"unix:{path}", "--tls-ca", str(ca.cert), "--tls-key", "k", "status")
    )
    assert given.stderr == (
        f"note: unix:{path} is a Unix-domain socket, which never uses TLS: "
        "--tls-ca, --tls-key not applied\n"
    )


def test_the_http_port_is_named_as_such(shared_daemon: DaemonProcess) -> None:
    http = f"127.0.0.1:{shared_daemon.http_port}"
    result = run(None, "--server", http, "queue", "list")
    assert result.exit_code == 1
    assert result.stderr.splitlines() == [
        f"error: handshake with the queue manager at {http} failed: the server answered in "
        "HTTP: this is an HTTP port (the queue manager's HTTP listener?), not its client port",
        "hint: give --server the queue manager's client address (`qmgr serve --client-listen`, "
        "port 1802 by default), not its HTTP address.",
    ]


@pytest.mark.parametrize(
    "command",
    [
        ("receive", "q", "--timeout", "nan"),
        ("peek", "q", "--timeout", "nan"),
        ("move", "q", "r", "--timeout", "nan"),
        ("send", "q", "--body", "x", "--ttbr", "nan"),
        ("send", "q", "--body", "x", "--ttrq", "nan"),
    ],
    ids=lambda c: f"{c[0]}-{c[-2]}",
)
def test_seconds_are_never_nan(command: tuple[str, ...]) -> None:
    result = run(None, *command)
    assert result.exit_code == 2
    assert f"Invalid value for '{command[-2]}': 'nan' is not a number of seconds" in result.stderr


def test_a_bad_address_is_a_usage_error_naming_it() -> None:
    result = run(None, "--server", "127.0.0.1:99999", "queue", "list")
    assert result.exit_code == 2
    assert result.stderr.endswith(
        "Error: Invalid value for '--server': '127.0.0.1:99999': '99999' is not a TCP port\n"
    )


@pytest.mark.parametrize("server", ["", "  "])
def test_an_empty_address_is_refused_not_taken_for_the_default(server: str) -> None:
    result = run(None, "--server", server, "status")
    assert result.exit_code == 2
    assert "Invalid value for '--server': is empty" in result.stderr


@pytest.mark.parametrize("server", ["::1:28002", "[::1:28002"])
def test_an_ipv6_address_with_a_port_needs_brackets(server: str) -> None:
    result = run(None, "--server", server, "status")
    assert result.exit_code == 2
    assert f"Invalid value for '--server': {server!r}" in result.stderr
    assert "write an IPv6 address with a port as [addr]:port" in result.stderr


def test_the_server_may_come_from_the_environment() -> None:
    address = f"127.0.0.1:{free_port()}"
    result = CliRunner().invoke(cli, ["status"], env={"QMGR_SERVER": address})
    assert result.exit_code == 1
    assert f"at {address}:" in result.stderr


@pytest.mark.parametrize("ca", [(), ("--tls-ca", "ca.pem")], ids=["plain", "with-a-ca"])
def test_a_tls_key_needs_a_certificate(ca: tuple[str, ...]) -> None:
    result = run(None, *ca, "--tls-key", "key.pem", "status")
    assert result.exit_code == 2  # a usage error, with or without a CA
    assert result.stderr.endswith("Error: --tls-key needs --tls-cert\n")
    given = CliRunner().invoke(cli, [*ca, "status"], env={"QMGR_TLS_KEY": "key.pem"})
    assert given.exit_code == 2
    assert given.stderr.endswith("Error: QMGR_TLS_KEY (--tls-key) needs --tls-cert\n")


def test_a_tls_certificate_without_its_key_says_to_give_it(tmp_path: Path) -> None:
    paths = init_ca(tmp_path)
    result = run(None, "--tls-cert", str(paths.cert), "status")
    assert result.exit_code == 1
    assert result.stderr == f"error: --tls-cert {paths.cert} holds no private key: give --tls-key\n"
    given = CliRunner().invoke(cli, ["status"], env={"QMGR_TLS_CERT": str(paths.cert)})
    assert given.exit_code == 1
    assert given.stderr.startswith(f"error: QMGR_TLS_CERT (--tls-cert) {paths.cert} holds no")
    # A file that holds the key too is a certificate and its key: on to connecting.
    both = tmp_path / "both.pem"
    both.write_bytes(paths.cert.read_bytes() + paths.key.read_bytes())
    address = f"127.0.0.1:{free_port()}"
    result = run(None, "--server", address, "--tls-cert", str(both), "status")
    assert result.exit_code == 1
    assert result.stderr.startswith(f"error: cannot connect to the queue manager at {address}")


_NOT_UNICODE = (
    "is not valid Unicode text (position 0: a lone surrogate, "
    "as non-UTF-8 bytes in a command-line argument give)"
)
_TOO_LONG = "is too long to send (65,536 characters): it can carry at most 65,535 bytes of UTF-8"
_LONG = "n" * 0x10000


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (("queue", "create", _LONG), f"cannot send this request: CreateQueue.name {_TOO_LONG}"),
        (("receive", _LONG), f"cannot send this request: Receive.queue {_TOO_LONG}"),
        (("queue", "purge", _LONG, "-y"), f"cannot send this request: PurgeQueue.name {_TOO_LONG}"),
        (("route", _LONG), f"cannot send this request: GetRouting.destination {_TOO_LONG}"),
        (
            ("queue", "create", "\udcff"),
            f"cannot send this request: CreateQueue.name {_NOT_UNICODE}",
        ),
        (
            ("send", "q", "--body", "x", "--label", "\udcff"),
            f"cannot send this message: label {_NOT_UNICODE}",
        ),
        (
            ("send", "q", "--body", "x", "--label", _LONG),
            f"cannot send this message: label {_TOO_LONG}",
        ),
        (("--token", "\udcff", "status"), f"--token {_NOT_UNICODE}"),
    ],
    ids=lambda value: value[0] if isinstance(value, tuple) and len(value[0]) < 10 else None,
)
def test_a_text_the_wire_cannot_carry_is_named(
    fake_daemon: FakeDaemon, args: tuple[str, ...], words: str
) -> None:
    result = run(fake_daemon, *args)
    assert result.exit_code == 1
    assert result.stderr == f"error: {words}\n"


def test_a_token_from_the_environment_is_named_so(fake_daemon: FakeDaemon) -> None:
    env = {"QMGR_TOKEN": "\udcff", "QMGR_SERVER": fake_daemon.address}
    result = CliRunner().invoke(cli, ["status"], env=env)
    assert result.exit_code == 1
    assert result.stderr == f"error: QMGR_TOKEN (--token) {_NOT_UNICODE}\n"


def test_reports_errors_prints_the_message_and_the_hint() -> None:
    @click.command()
    @common.reports_errors
    def failing() -> None:
        raise common.CliError("it broke", hint="mend it")

    result = CliRunner().invoke(failing)
    assert (result.exit_code, result.stdout) == (1, "")
    assert result.stderr.splitlines() == ["error: it broke", "hint: mend it"]


def test_confirm_asks_only_on_a_terminal_and_without_yes(monkeypatch: pytest.MonkeyPatch) -> None:
    @click.command()
    @common.yes_option
    def delete(yes: bool) -> None:
        common.confirm("Delete it?", yes)
        click.echo("deleted")

    runner = CliRunner()
    assert runner.invoke(delete).stdout == "deleted\n"  # no terminal: no question
    monkeypatch.setattr(common, "interactive", lambda: True)
    assert runner.invoke(delete, ["--yes"]).stdout == "deleted\n"
    refused = runner.invoke(delete, input="n\n")
    assert refused.exit_code == 1
    assert "Delete it? [y/N]" in refused.stderr
    assert "nothing done" in refused.stderr
    assert refused.stdout == ""
    assert runner.invoke(delete, ["-y"], input="").stdout == "deleted\n"
    assert ok(runner.invoke(delete, input="y\n")).stdout == "deleted\n"


def test_print_listing() -> None:
    def names_table(names: tuple[str, ...]) -> Table:
        table = common.listing_table(common.folded("name"), common.right("length"))
        for name in names:
            table.add_row(name, str(len(name)))
        return table

    @click.command()
    @click.argument("items", nargs=-1)
    @common.json_option("Print a JSON array.")
    def listing(items: tuple[str, ...], as_json: bool) -> None:
        common.print_listing(items, as_json, str.upper, names_table, empty="none")

    runner = CliRunner()
    assert json.loads(runner.invoke(listing, ["a", "bc", "--json"]).stdout) == ["A", "BC"]
    assert json.loads(runner.invoke(listing, ["--json"]).stdout) == []
    assert runner.invoke(listing).stdout == "none\n"
    lines = runner.invoke(listing, ["a", "bc"]).stdout.splitlines()
    assert lines[0].split() == ["name", "┃", "length"]
    assert [line.split() for line in lines[2:]] == [["a", "│", "1"], ["bc", "│", "2"]]


def test_a_long_listing_is_plain_aligned_text_with_every_cell_whole(
    capsys: pytest.CaptureFixture[str],
) -> None:
    rows = [(f"queue-{n}", n) for n in range(common.PLAIN_ROWS + 1)]

    def table(items: Sequence[tuple[str, int]]) -> Table:
        built = common.listing_table("queue", common.right("depth"))
        for name, depth in items:
            built.add_row(name, str(depth))
        return built

    common.print_listing(rows, False, lambda row: row, table)
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["queue", "depth"]
    assert set(lines[1].replace(" ", "")) == {"-"}
    assert len(lines) == len(rows) + 2
    width = len("queue-2000")
    assert lines[2] == "queue-0".ljust(width) + "  " + "0".rjust(len("depth"))
    assert lines[-1] == f"queue-{common.PLAIN_ROWS}  " + str(common.PLAIN_ROWS).rjust(len("depth"))
    # A short listing stays a table for people.
    common.print_listing(rows[:3], False, lambda row: row, table)
    assert "━" in capsys.readouterr().out
