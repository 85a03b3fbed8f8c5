"""Client authentication with real daemons: tokens (kept hashed, in the configuration
or a file; a wrong token refused and counted against its address), the Unix-domain
socket whose clients are their local user, and requests before authenticating."""

from __future__ import annotations

import os
import pwd
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner
from helpers import DaemonProcess
from pki import log_events

from qmgr.cli import cli
from qmgr.client import AccessDenied, ConnectionLost, connect
from qmgr.core.tokens import hash_token

ALICE_TOKEN = "alice-token-0123456789abcdefghijklmnopqrstuvwxyz"


def with_tokens(*more: str) -> list[str]:
    return [
        "--set",
        "auth.required=true",
        "--set",
        f'auth.tokens={{ alice = "{hash_token(ALICE_TOKEN)}" }}',
        "--set",
        "auth.default_acl={}",
        *more,
    ]


def test_tokens_authenticate_and_anything_else_is_refused(
    daemon_factory: Callable[..., DaemonProcess],
) -> None:
    daemon = daemon_factory(
        extra_args=with_tokens("--set", "auth.failure_limit=2", "--set", "auth.failure_delay=0.1")
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
