"""The ``qmgr`` command against a real daemon.

Client commands run in-process with click's runner (fast); ``qmgr serve``
and the exit statuses of the real program run as subprocesses.
"""

from __future__ import annotations

import base64
import json
import os
import signal
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from cli.kit import ok, run
from click.testing import CliRunner, Result
from helpers import DaemonProcess, free_port, log_events, run_qmgr

from qmgr.cli import cli
from qmgr.client import connect
from qmgr.core.tokens import hash_token


def json_lines(result: Result) -> list[dict[str, Any]]:
    return [json.loads(line) for line in result.stdout.splitlines() if line.strip()]


def test_queue_commands(shared_daemon: DaemonProcess, queue_name: str) -> None:
    ok(run(shared_daemon, "queue", "create", queue_name, "--transactional", "--quota", "1K"))
    ok(run(shared_daemon, "queue", "create", f"{queue_name}-j", "--journal"))
    listed = json.loads(ok(run(shared_daemon, "queue", "list", "--json")).stdout)
    by_name = {q["name"]: q for q in listed}
    queue = by_name[queue_name]
    assert (queue["transactional"], queue["quota"], queue["depth"]) == (True, 1024, 0)
    assert queue["kind"] == "normal"
    assert by_name[f"{queue_name}-j"]["journal"] is True
    assert by_name[f"{queue_name}-j;journal"]["kind"] == "journal"

    table = ok(run(shared_daemon, "queue", "list")).stdout
    assert queue_name in table
    assert "depth" in table

    duplicate = run(shared_daemon, "queue", "create", queue_name)
    assert duplicate.exit_code == 1
    assert duplicate.stderr.startswith("error: ")
    assert "already exists" in duplicate.stderr

    ok(run(shared_daemon, "send", queue_name, "--body", "x", "--count", "3"))
    purged = ok(run(shared_daemon, "queue", "purge", queue_name, "--yes"))
    assert "purged 3 messages" in purged.stdout
    deleted = ok(run(shared_daemon, "queue", "delete", queue_name, "--yes"))
    assert f"deleted queue {queue_name!r}" in deleted.stdout
    missing = run(shared_daemon, "queue", "delete", queue_name, "--yes")
    assert missing.exit_code == 1
    assert "does not exist" in missing.stderr


def test_send_and_receive_json(shared_daemon: DaemonProcess, queue_name: str) -> None:
    ok(run(shared_daemon, "queue", "create", queue_name))
    sent = ok(run(shared_daemon, "send", queue_name, "--body", "héllo", "--label", "greet"))
    message_id = sent.stdout.strip()
    ok(run(shared_daemon, "send", queue_name, "--body", "urgent", "--priority", "7", "--express"))

    peeked = json_lines(ok(run(shared_daemon, "receive", queue_name, "--peek", "--json")))
    assert [m["body"] for m in peeked] == ["urgent"]

    result = ok(run(shared_daemon, "receive", queue_name, "--count", "5", "--json"))
    messages = json_lines(result)
    assert [m["body"] for m in messages] == ["urgent", "héllo"]
    urgent, hello = messages
    assert (urgent["priority"], urgent["delivery"]) == (7, "express")
    assert hello["id"] == message_id
    assert hello["label"] == "greet"
    assert hello["body_encoding"] == "utf-8"
    assert hello["correlation_id"] is None
    assert hello["time_to_be_received"] is None
    assert hello["transactional"] is False
    assert hello["queue"] == queue_name
    for key in ("lookup_id", "app_specific", "message_class", "source_qm", "destination"):
        assert key in hello
    assert hello["sent_time"].endswith("+00:00")  # ISO-8601 with the zone
    assert "received 2 of 5 messages" in result.stderr


def test_binary_bodies_are_base64(
    shared_daemon: DaemonProcess, queue_name: str, tmp_path: Path
) -> None:
    payload = bytes(range(256))
    path = tmp_path / "body.bin"
    path.write_bytes(payload)
    ok(run(shared_daemon, "queue", "create", queue_name))
    ok(run(shared_daemon, "send", queue_name, "--file", str(path)))
    text = ok(run(shared_daemon, "receive", queue_name, "--peek")).stdout
    assert "256 bytes of binary data" in text
    (message,) = json_lines(ok(run(shared_daemon, "receive", queue_name, "--json")))
    assert message["body_encoding"] == "base64"
    assert base64.b64decode(message["body"]) == payload


def test_body_from_stdin_and_text_output(shared_daemon: DaemonProcess, queue_name: str) -> None:
    ok(run(shared_daemon, "queue", "create", queue_name, "--transactional"))
    ok(run(shared_daemon, "send", queue_name, "--label", "piped", input="from stdin"))
    result = ok(run(shared_daemon, "receive", queue_name))
    assert "label 'piped'" in result.stdout
    assert result.stdout.rstrip().endswith("from stdin")


def test_receive_waits_for_the_timeout(shared_daemon: DaemonProcess, queue_name: str) -> None:
    ok(run(shared_daemon, "queue", "create", queue_name))
    result = ok(run(shared_daemon, "receive", queue_name, "--timeout", "0.2"))
    assert result.stdout == ""
    assert "received 0 of 1 message" in result.stderr


def test_send_count_and_transaction_flags(shared_daemon: DaemonProcess, queue_name: str) -> None:
    ok(run(shared_daemon, "queue", "create", queue_name, "--transactional"))
    result = ok(run(shared_daemon, "send", queue_name, "--body", "b", "--count", "25"))
    assert "sent 25 messages" in result.stdout
    refused = run(shared_daemon, "send", queue_name, "--body", "b", "--no-transactional")
    assert refused.exit_code == 1
    assert "transactional" in refused.stderr
    ok(run(shared_daemon, "send", queue_name, "--body", "b", "--transactional"))
    with connect(shared_daemon.address) as qm:
        assert len(qm.peek_range(queue_name)) == 26


def test_status(shared_daemon: DaemonProcess, queue_name: str) -> None:
    ok(run(shared_daemon, "queue", "create", queue_name))
    ok(run(shared_daemon, "send", queue_name, "--body", "12345"))
    status = json.loads(ok(run(shared_daemon, "status", "--json")).stdout)
    assert status["qm_name"] == "qmgr-shared"
    assert status["qm_guid"]
    assert status["server_version"]
    assert status["connections"] >= 1
    assert status["open_transactions"] >= 0
    assert status["uptime_seconds"] >= 0
    queue = next(q for q in status["queues"] if q["name"] == queue_name)
    assert (queue["depth"], queue["bytes"], queue["locked"]) == (1, 5, 0)
    table = ok(run(shared_daemon, "status")).stdout
    assert "qmgr-shared" in table
    assert status["qm_guid"] in table
    assert queue_name in table


def test_errors(shared_daemon: DaemonProcess, tmp_path: Path) -> None:
    result = run(shared_daemon, "send", "no-such-queue", "--body", "x")
    assert result.exit_code == 1
    assert result.stderr == "error: queue 'no-such-queue' does not exist\n"
    result = run(shared_daemon, "queue", "create", "bad;name")
    assert result.exit_code == 1
    assert result.stderr.startswith("error: ")
    result = run(shared_daemon, "send", "q", "--body", "x", "--file", str(tmp_path))
    assert result.exit_code == 2  # a usage error


def test_errors_name_queues_as_they_are_typed(shared_daemon: DaemonProcess) -> None:
    """A name in an error is quoted as it is typed, its backslashes not doubled (as
    ``repr`` would), so that the operator can copy it back into a command."""
    local = ".\\private$\\orders"
    result = run(shared_daemon, "outgoing", "pause", local)
    assert result.exit_code == 1
    assert result.stderr == f"error: '{local}' is not a queue on another queue manager\n"
    remote = "DIRECT=TCP:10.9.9.9\\private$\\orders"
    result = run(shared_daemon, "outgoing", "pause", remote)
    assert result.exit_code == 1
    assert result.stderr == f"error: there is no outgoing queue for '{remote}'\n"
    bad = "DIRECT=TCP:10.9.9.9\\orders"
    result = run(shared_daemon, "send", bad, "--body", "x")
    assert result.exit_code == 1
    assert result.stderr == (
        f"error: '{bad}': expected private$\\<queue> or system$;deadletter|deadxact|journal\n"
    )
    assert "\\\\" not in result.stderr


def test_server_from_the_environment(shared_daemon: DaemonProcess) -> None:
    result = CliRunner().invoke(
        cli, ["status", "--json"], env={"QMGR_SERVER": shared_daemon.address}
    )
    assert json.loads(ok(result).stdout)["qm_name"] == "qmgr-shared"


def test_no_daemon_gives_a_hint() -> None:
    address = f"127.0.0.1:{free_port()}"
    result = CliRunner().invoke(cli, ["--server", address, "queue", "list"])
    assert result.exit_code == 1
    assert result.stderr.startswith(f"error: cannot connect to the queue manager at {address}")
    assert "qmgr serve" in result.stderr
    assert "make run" in result.stderr


# --------------------------------------------------------------------------
# The real program
# --------------------------------------------------------------------------


def qmgr(*args: str) -> subprocess.CompletedProcess[str]:
    """The installed program itself: ``python -m qmgr ARGS`` (the other tests that
    need a process of its own fork one from a server that imported qmgr already:
    ``helpers.run_qmgr``)."""
    return run_qmgr(*args, launch="exec")


def test_program_exit_statuses(shared_daemon: DaemonProcess) -> None:
    listed = qmgr("--server", shared_daemon.address, "queue", "list", "--json")
    assert listed.returncode == 0, listed.stderr
    assert any(q["name"] == "system$;deadletter" for q in json.loads(listed.stdout))
    refused = qmgr("--server", f"127.0.0.1:{free_port()}", "status")
    assert refused.returncode == 1
    assert refused.stderr.startswith("error: ")
    assert "hint: " in refused.stderr


def test_serve_configuration_errors(tmp_path: Path, shared_daemon: DaemonProcess) -> None:
    config = tmp_path / "bad.toml"
    config.write_text("[server]\nnmae = 'typo'\n")
    bad = qmgr("serve", "--config", str(config), "--data-dir", str(tmp_path / "d"))
    assert bad.returncode == 2
    assert bad.stderr.startswith("error: ")
    assert "server.nmae" in bad.stderr

    taken = run_qmgr(
        "serve",
        "--data-dir",
        str(tmp_path / "d"),
        "--client-listen",
        shared_daemon.address,
        "--listen",
        f"127.0.0.1:{free_port()}",
        "--http-listen",
        "",
        "--log-format",
        "json",
    )
    assert taken.returncode == 1
    # With JSON logs asked for, why it did not start is a JSON event among its lines.
    failed = json.loads(taken.stderr.splitlines()[-1])
    assert (failed["event"], failed["level"], failed["status"]) == ("start_failed", "error", 1)
    assert "already in use" in failed["error"]
    # Nothing was made in the data directory: the ports are bound before the store opens.
    assert not (tmp_path / "d").exists() or not any((tmp_path / "d").iterdir())


def _serve_with_tokens(tmp_path: Path, tokens: Path) -> subprocess.CompletedProcess[str]:
    return run_qmgr(
        "serve",
        "--data-dir",
        str(tmp_path / "d"),
        "--client-listen",
        f"127.0.0.1:{free_port()}",
        "--listen",
        f"127.0.0.1:{free_port()}",
        "--http-listen",
        "",
        "--set",
        "auth.required=true",
        "--set",
        f"auth.tokens_file={tokens}",
    )


@pytest.mark.parametrize(
    ("content", "mode", "expected"),
    [
        (None, 0o600, "cannot read auth.tokens_file {path}: No such file or directory"),
        ("bob sha256:00\n", 0o600, "auth.tokens_file {path}, line 1: 'sha256:00'"),
        ("# bob\n\nbob\n", 0o600, "auth.tokens_file {path}, line 3: expected NAME HASH"),
        (f"bob {hash_token('x')}\n", 0o666, "auth.tokens_file {path} can be written by other"),
        (f"group:ops {hash_token('x')}\n", 0o600, "line 1: 'group:ops' names a group, a peer"),
    ],
    ids=["missing", "bad hash", "bad line", "writable by others", "a group's name"],
)
def test_a_bad_tokens_file_is_a_configuration_error(
    tmp_path: Path, content: str | None, mode: int, expected: str
) -> None:
    tokens = tmp_path / "tokens"
    if content is not None:
        tokens.write_text(content)
        tokens.chmod(mode)
    bad = _serve_with_tokens(tmp_path, tokens)
    assert bad.returncode == 2, bad.stderr
    assert expected.format(path=tokens) in bad.stderr
    assert not (tmp_path / "d").exists()


def test_a_tokens_file_another_user_owns_is_a_configuration_error(tmp_path: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("giving a file to another user needs root")
    tokens = tmp_path / "tokens"
    tokens.write_text(f"bob {hash_token('x')}\n")
    tokens.chmod(0o600)
    os.chown(tokens, 54321, -1)  # a user other than the daemon's, who may rewrite it
    bad = _serve_with_tokens(tmp_path, tokens)
    assert bad.returncode == 2, bad.stderr
    assert f"error: auth.tokens_file {tokens} is owned by " in bad.stderr
    assert f"(chown root {tokens})" in bad.stderr
    assert not (tmp_path / "d").exists()


def test_a_tokens_file_other_users_can_read_is_used_with_a_warning(
    tmp_path: Path, daemon_factory: Callable[..., DaemonProcess]
) -> None:
    tokens = tmp_path / "tokens"
    tokens.write_text(f"bob {hash_token('bob-token')}\n")
    tokens.chmod(0o644)
    daemon = daemon_factory(
        extra_args=["--set", "auth.required=true", "--set", f"auth.tokens_file={tokens}"]
    )
    assert run_qmgr("--server", daemon.address, "--token", "bob-token", "status").returncode == 0
    [warning] = log_events(daemon, "tokens_file_readable")
    assert "can be read by other users (mode 0644)" in str(warning["problem"])


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP])
def test_serve_exits_0_on_signal(daemon_factory: Callable[..., DaemonProcess], signum: int) -> None:
    daemon = daemon_factory(launch="exec")  # the program itself, from its start
    with connect(daemon.address) as qm:
        qm.create_queue("q", transactional=True)
        tx = qm.begin()
        tx.send("q", b"never committed")
        qm.status()  # the transaction is open on the daemon
        daemon.signal(signum)
        assert daemon.wait() == 0
    log = [json.loads(line) for line in daemon.log().splitlines() if line.startswith("{")]
    events = [entry["event"] for entry in log]
    assert "queue_manager_started" in events
    assert events[-1] == "queue_manager_stopped"
    assert log[-1]["open_transactions_aborted"] == 1
    [aborted] = [entry for entry in log if entry["event"] == "transaction_aborted"]
    assert aborted["reason"] == "the queue manager is shutting down"


def test_move_is_one_transaction_per_message(shared_daemon: DaemonProcess, queue_name: str) -> None:
    source, target, plain = f"{queue_name}-from", f"{queue_name}-to", f"{queue_name}-plain"
    with connect(shared_daemon.address) as qm:
        qm.create_queue(source, transactional=True)
        qm.create_queue(target, transactional=True)
        qm.create_queue(plain)
        for index in range(3):
            qm.send(source, f"m{index}".encode(), label=f"l{index}", app_specific=index)
    result = ok(run(shared_daemon, "move", source, target, "--count", "5"))
    assert "moved 3 messages" in result.stdout
    assert "moved 3 of 5 messages" in result.stderr
    with connect(shared_daemon.address) as qm:
        moved = qm.peek_range(target)
        assert [(m.body, m.label, m.app_specific) for m in moved] == [
            (b"m0", "l0", 0),
            (b"m1", "l1", 1),
            (b"m2", "l2", 2),
        ]
        assert qm.peek_range(source) == []
        qm.send(source, b"stays")
    # Into a non-transactional queue the send fails, so the commit aborts and
    # the message stays where it was.
    failed = run(shared_daemon, "move", source, plain)
    assert failed.exit_code == 1
    assert "not transactional" in failed.stderr
    with connect(shared_daemon.address) as qm:
        assert [m.body for m in qm.peek_range(source)] == [b"stays"]
        assert qm.peek_range(plain) == []


def test_queue_names_are_printed_as_text_not_console_markup(
    shared_daemon: DaemonProcess, queue_name: str
) -> None:
    name = f"{queue_name}-[bold]x[/]-job[/x]1"
    created = run_qmgr("--server", shared_daemon.address, "queue", "create", name)
    assert created.returncode == 0, created.stderr
    listed = run_qmgr("--server", shared_daemon.address, "queue", "list")
    assert listed.returncode == 0, listed.stderr
    assert name in listed.stdout
    status = run_qmgr("--server", shared_daemon.address, "status")
    assert status.returncode == 0, status.stderr
    assert name in status.stdout
