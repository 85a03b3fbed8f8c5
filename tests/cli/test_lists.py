"""``qmgr dl ...`` (``qmgr/cli/lists.py``), against the session's real queue manager.

Sending to a list is in ``tests/integration/test_distribution_lists.py``.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator

import pytest
from helpers import DaemonProcess

from qmgr.cli import lists as lists_module

from .kit import ok, run


def queues(daemon: DaemonProcess, *names: str) -> None:
    """Create the queues ``names`` (a list's targets here must exist)."""
    for queue in names:
        ok(run(daemon, "queue", "create", queue))


def test_the_commands_say_what_they_did(shared_daemon: DaemonProcess, queue_name: str) -> None:
    name, a, b = f"{queue_name}-dl", f"{queue_name}-a", f"{queue_name}-b"
    queues(shared_daemon, a, b)
    made = ok(run(shared_daemon, "dl", "create", name))
    assert made.stdout == f"created distribution list {name} with 0 targets\n"
    assert ok(run(shared_daemon, "dl", "add", name, a, b)).stdout == f"{name}: 2 targets\n"
    assert ok(run(shared_daemon, "dl", "remove", name, a)).stdout == f"{name}: 1 target\n"
    listed = ok(run(shared_daemon, "dl", "list", name, "--json")).stdout
    assert listed == f'[{{"name": "{name}", "targets": ["{b}"]}}]\n'  # one line
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
    x, y = f"{queue_name}-x[b]", f"{queue_name}-y"
    queues(shared_daemon, x, y)
    ok(run(shared_daemon, "dl", "create", empty))
    ok(run(shared_daemon, "dl", "create", full, x, y))
    every = {
        entry["name"]: entry["targets"]
        for entry in json.loads(ok(run(shared_daemon, "dl", "list", "--json")).stdout)
    }
    assert (every[empty], every[full]) == ([], [x, y])
    table = ok(run(shared_daemon, "dl", "list")).stdout
    rows = [
        [cell.strip() for cell in line.split("│")[1:-1]]
        for line in table.splitlines()
        if "│" in line
    ]
    assert [empty, "(none)"] in rows
    at = rows.index([full, x])
    assert rows[at + 1] == ["", y]


def test_a_target_naming_no_queue_is_refused(shared_daemon: DaemonProcess, queue_name: str) -> None:
    name, missing = f"{queue_name}-dl", f"{queue_name}-missing"
    refused = run(shared_daemon, "dl", "create", name, missing)
    assert (refused.exit_code, refused.stderr) == (1, f"error: queue '{missing}' does not exist\n")
    ok(run(shared_daemon, "dl", "create", name))  # the refused create made no list
    refused = run(shared_daemon, "dl", "add", name, missing)
    assert (refused.exit_code, refused.stderr) == (1, f"error: queue '{missing}' does not exist\n")
    assert ok(run(shared_daemon, "dl", "list", name, "--json")).stdout == (
        f'[{{"name": "{name}", "targets": []}}]\n'
    )


def test_a_bad_list_name_is_called_a_list_name(
    shared_daemon: DaemonProcess, queue_name: str
) -> None:
    queues(shared_daemon, queue_name)
    bad = run(shared_daemon, "dl", "create", "x\x1b[31my", queue_name)
    assert bad.exit_code == 1
    assert bad.stderr == (
        "error: distribution list name 'x\\x1b[31my' contains a control character\n"
    )


def test_add_and_remove_need_targets() -> None:
    for verb in ("add", "remove"):
        result = run(None, "dl", verb, "fanout")
        assert result.exit_code == 2, verb
        assert "Missing argument 'TARGET...'" in result.stderr, verb


def test_no_lists_is_said_in_words_and_as_an_empty_array(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    class NoLists:
        def lists(self) -> list[object]:
            return []

    @contextlib.contextmanager
    def client(ctx: object) -> Iterator[NoLists]:
        yield NoLists()

    monkeypatch.setattr(lists_module, "client", client)
    assert ok(run(None, "dl", "list")).stdout == "no distribution lists\n"
    assert ok(run(None, "dl", "list", "--json")).stdout == "[]\n"
