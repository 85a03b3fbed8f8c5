"""``qmgr dl ...`` (``qmgr/cli/lists.py``), against the session's real queue manager.

Sending to a list is in ``tests/integration/test_distribution_lists.py``.
"""

from __future__ import annotations

import json

from helpers import DaemonProcess

from .kit import ok, run


def test_the_commands_say_what_they_did(shared_daemon: DaemonProcess, queue_name: str) -> None:
    name = f"{queue_name}-dl"
    made = ok(run(shared_daemon, "dl", "create", name))
    assert made.stdout == f"created distribution list {name} with 0 targets\n"
    assert ok(run(shared_daemon, "dl", "add", name, "a", "b")).stdout == f"{name}: 2 targets\n"
    assert ok(run(shared_daemon, "dl", "remove", name, "a")).stdout == f"{name}: 1 target\n"
    listed = ok(run(shared_daemon, "dl", "list", name, "--json")).stdout
    assert listed == f'[{{"name": "{name}", "targets": ["b"]}}]\n'  # one line
    assert ok(run(shared_daemon, "dl", "delete", name)).stdout == (
        f"deleted distribution list {name}\n"
    )
    missing = run(shared_daemon, "dl", "list", name)
    assert missing.exit_code == 1
    assert "does not exist" in missing.stderr


def test_list_shows_every_list_and_their_targets(
    shared_daemon: DaemonProcess, queue_name: str
) -> None:
    empty, full = f"{queue_name}-empty", f"{queue_name}-full"
    ok(run(shared_daemon, "dl", "create", empty))
    ok(run(shared_daemon, "dl", "create", full, "x[b]", "y"))
    every = {
        entry["name"]: entry["targets"]
        for entry in json.loads(ok(run(shared_daemon, "dl", "list", "--json")).stdout)
    }
    assert (every[empty], every[full]) == ([], ["x[b]", "y"])
    table = ok(run(shared_daemon, "dl", "list")).stdout
    rows = [
        [cell.strip() for cell in line.split("│")[1:-1]]
        for line in table.splitlines()
        if "│" in line
    ]
    assert [empty, "(none)"] in rows
    at = rows.index([full, "x[b]"])
    assert rows[at + 1] == ["", "y"]


def test_add_and_remove_need_targets() -> None:
    for verb in ("add", "remove"):
        result = run(None, "dl", verb, "fanout")
        assert result.exit_code == 2, verb
        assert "Missing argument 'TARGET...'" in result.stderr, verb
