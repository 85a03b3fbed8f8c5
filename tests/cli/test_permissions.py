"""``qmgr queue grant|revoke|acl`` (``qmgr/cli/permissions.py``), against the session's
real queue manager. What the rights allow is in ``tests/integration/test_permissions.py``."""

from __future__ import annotations

import json

import pytest
from helpers import DaemonProcess

from .kit import ok, run


def _rows(output: str) -> dict[str, str]:
    rows = [line.split("│") for line in output.splitlines()[2:]]
    return {entry.strip(): rights.strip() for entry, rights in rows}


def test_grant_revoke_and_show(shared_daemon: DaemonProcess, queue_name: str) -> None:
    ok(run(shared_daemon, "queue", "create", queue_name))
    granted = ok(run(shared_daemon, "queue", "grant", queue_name, "al[i]ce", "send", "peek"))
    assert granted.stdout.splitlines()[0].split() == ["entry", "┃", "rights"]
    assert _rows(granted.stdout)["al[i]ce"] == "send, peek"  # a name, never console markup
    assert "everyone" in _rows(granted.stdout)
    listed = json.loads(ok(run(shared_daemon, "queue", "acl", queue_name, "--json")).stdout)
    assert listed["queue"] == queue_name
    assert listed["entries"]["al[i]ce"] == ["send", "peek"]
    fewer = ok(run(shared_daemon, "queue", "revoke", queue_name, "al[i]ce", "peek", "--json"))
    assert json.loads(fewer.stdout)["entries"]["al[i]ce"] == ["send"]
    none = ok(run(shared_daemon, "queue", "revoke", queue_name, "al[i]ce"))
    assert "al[i]ce" not in _rows(none.stdout)
    assert _rows(ok(run(shared_daemon, "queue", "acl", queue_name)).stdout) == _rows(none.stdout)


def test_grant_needs_rights_and_a_queue(shared_daemon: DaemonProcess, queue_name: str) -> None:
    usage = run(shared_daemon, "queue", "grant", queue_name, "alice")
    assert usage.exit_code == 2
    assert "Missing argument 'RIGHTS...'" in usage.stderr
    missing = run(shared_daemon, "queue", "grant", f"{queue_name}-none", "alice", "send")
    assert missing.exit_code == 1
    assert missing.stderr.startswith("error: ")
    assert "does not exist" in missing.stderr


@pytest.mark.parametrize(("verb", "shown"), [("grant", "RIGHTS..."), ("revoke", "[RIGHTS]...")])
def test_an_unknown_right_is_a_usage_error(verb: str, shown: str) -> None:
    """Refused with exit status 2 before any queue manager is asked (none runs here)."""
    result = run(None, "queue", verb, "orders", "worker", "send", "fly")
    assert result.exit_code == 2, result.output
    assert result.stderr.splitlines()[-1] == (
        f"Error: Invalid value for '{shown}': unknown right 'fly'; rights are send, receive, "
        "peek, purge, delete, set-properties, get-properties, change-permissions, full"
    )
