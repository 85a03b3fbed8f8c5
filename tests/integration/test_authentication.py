"""Client authentication with real daemons: tokens (kept hashed, in the configuration
or a file; a wrong token refused and counted against its address), the Unix-domain
socket whose clients are their local user, and requests before authenticating."""

from __future__ import annotations

import os
import pwd
import select
import socket
import time
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path

import pytest
from click.testing import CliRunner
from helpers import DaemonProcess, auth_required, log_events, settings

from qmgr.cli import cli
from qmgr.client import AccessDenied, ConnectionLost, connect
from wire import client as cf

ALICE_TOKEN = "alice-token-0123456789abcdefghijklmnopqrstuvwxyz"


def with_tokens(*more: str) -> list[str]:
    """``qmgr serve`` arguments: alice's token authenticates, nobody has rights by default."""
    return [*auth_required({"alice": ALICE_TOKEN}), *more]


def test_tokens_authenticate_and_anything_else_is_refused(
    daemon_factory: Callable[..., DaemonProcess],
) -> None:
    daemon = daemon_factory(
        extra_args=with_tokens(*settings("auth.failure_limit=2", "auth.failure_delay=0.1"))
    )
    with connect(daemon.address, token=ALICE_TOKEN) as alice:
        alice.create_queue("alices", transactional=True)
        assert alice.permissions("alices") == {"alice": ["full"]}
    with pytest.raises(AccessDenied, match="authenticate first"):
        with connect(daemon.address) as anonymous:
            anonymous.list_queues()
    for _ in range(2):
        with pytest.raises(AccessDenied, match="the token is not accepted"):
            connect(daemon.address, token="not-" + ALICE_TOKEN)
    with connect(daemon.address, token=ALICE_TOKEN) as alice:  # served, after a delay
        assert [q.name for q in alice.list_queues() if q.name == "alices"] == ["alices"]
    assert len(log_events(daemon, "authentication_failed")) == 2
    assert log_events(daemon, "connection_delayed")
    [authenticated, *_] = log_events(daemon, "client_authenticated")
    assert authenticated["principal"] == "alice"
    # The token never reaches the log.
    assert ALICE_TOKEN not in daemon.log()


def test_a_tokens_file_made_by_the_cli(
    daemon_factory: Callable[..., DaemonProcess], tmp_path: Path
) -> None:
    tokens = tmp_path / "tokens"
    made = CliRunner().invoke(cli, ["auth", "token", "bob", "--file", str(tokens)])
    assert made.exit_code == 0, made.output
    token = made.output.strip().splitlines()[-2].strip()
    assert oct(tokens.stat().st_mode & 0o777) == "0o600"
    assert token not in tokens.read_text()
    daemon = daemon_factory(
        extra_args=["--set", "auth.required=true", "--set", f"auth.tokens_file={tokens}"]
    )
    runner = CliRunner()
    listed = runner.invoke(cli, ["--server", daemon.address, "--token", token, "status"])
    assert listed.exit_code == 0, listed.output
    refused = runner.invoke(cli, ["--server", daemon.address, "--token", "wrong", "status"])
    assert refused.exit_code == 1
    assert "not accepted" in refused.output


def test_local_clients_on_the_unix_socket_are_their_user(
    daemon_factory: Callable[..., DaemonProcess], tmp_path: Path
) -> None:
    path = tmp_path / "run" / "qmgr.sock"
    daemon = daemon_factory(extra_args=with_tokens("--set", f"server.unix_socket={path}"))
    me = pwd.getpwuid(os.getuid()).pw_name
    with connect(f"unix:{path}") as local:
        local.create_queue("local-only", transactional=True)
        assert local.permissions("local-only") == {me: ["full"]}
        local.send("local-only", b"x", transactional=True)
    with connect(daemon.address, token=ALICE_TOKEN) as alice:
        with pytest.raises(AccessDenied, match="'alice' may not receive on queue 'local-only'"):
            alice.receive("local-only", timeout=0)
    assert oct(path.stat().st_mode & 0o777) == "0o666"
    daemon.stop()
    assert not path.exists()
    with pytest.raises(ConnectionLost):
        connect(f"unix:{path}")


def test_connections_that_never_authenticate_cannot_keep_an_authenticated_client_out(
    daemon_factory: Callable[..., DaemonProcess],
) -> None:
    """256 connections from 127.0.0.1 say Hello and never authenticate (with a
    Hello deadline of a minute): a client with a token is still served at once,
    and the daemon keeps at most limits.max_unauthenticated_per_address (64) of
    them, closing the oldest with the reason."""
    daemon = daemon_factory(extra_args=with_tokens("--set", "server.hello_timeout=60"))
    hello = cf.encode_frame(1, cf.Hello(client_name="lurker"))
    host, port = daemon.address.rsplit(":", 1)
    with ExitStack() as stack:
        lurkers: dict[socket.socket, list[cf.FrameValue]] = {}
        for _ in range(256):
            sock = stack.enter_context(socket.create_connection((host, int(port)), timeout=10))
            sock.sendall(hello)
            lurkers[sock] = []
        for sock, frames in lurkers.items():
            frames.extend(_frames(sock, 1))
            assert isinstance(frames[0], cf.HelloOk)
        started = time.monotonic()
        result = CliRunner().invoke(
            cli, ["--server", daemon.address, "--token", ALICE_TOKEN, "status", "--json"]
        )
        assert result.exit_code == 0, result.output
        assert time.monotonic() - started < 10
        # All but the newest 64 (and one more, for alice) were closed, each told why.
        deadline = time.monotonic() + 10
        while True:
            closed = [sock for sock, frames in lurkers.items() if _closed(sock, frames)]
            if len(closed) >= 193 or time.monotonic() > deadline:
                break
            time.sleep(0.01)
        assert len(closed) == 193
        for sock in closed:
            [_, farewell] = lurkers[sock]
            assert isinstance(farewell, cf.ErrorReply)
            assert "has not authenticated" in farewell.message
    evictions = log_events(daemon, "connection_closed")
    assert sum("has not authenticated" in str(e.get("reason")) for e in evictions) == 193


def _frames(sock: socket.socket, count: int) -> list[cf.FrameValue]:
    """The next ``count`` frames (fewer if the connection closes first)."""
    decoder = cf.ClientFrameDecoder()
    found: list[cf.FrameValue] = []
    while len(found) < count:
        frame = decoder.next_frame()
        if frame is not None:
            found.append(frame.value)
            continue
        data = sock.recv(1)  # byte by byte: nothing of a later frame is lost
        if not data:
            break
        decoder.receive_data(data)
    return found


def _closed(sock: socket.socket, frames: list[cf.FrameValue]) -> bool:
    """True once the daemon closed ``sock``; its frames are read into ``frames``."""
    readable, _, _ = select.select([sock], [], [], 0)
    if not readable:
        return False
    frames.extend(_frames(sock, 1))
    readable, _, _ = select.select([sock], [], [], 0)
    return bool(readable) and sock.recv(1) == b""
