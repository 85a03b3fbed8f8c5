"""``qmgr queue create|list|show|delete|purge`` (``qmgr/cli/queues.py``) and how a queue is shown.

The commands run against the session's real queue manager, each test on
queues of its own.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json

import click
import pytest
from helpers import DaemonProcess
from rich.console import Console

from qmgr.cli import common
from qmgr.cli.queues import ByteCount, find_queue, queue_json, queue_table, retry_text
from qmgr.client import QueueInfo

from .kit import ok, run

CREATED = dt.datetime(2024, 1, 2, 3, 4, 5, tzinfo=dt.UTC)
ORDERS = QueueInfo(
    name="orders",
    format_name=".\\private$\\orders",
    kind="normal",  # type: ignore[arg-type]
    transactional=True,
    journal=False,
    quota=10 * 1024**2,
    depth=3,
    bytes=1536,
    locked=1,
    created_at=CREATED,
    retry_count=5,
    retry_cycles=2,
    retry_delay=1800.0,
)


@pytest.mark.parametrize(
    ("text", "count"),
    [
        ("1048576", 1048576),
        ("512K", 512 * 1024),
        ("10M", 10 * 1024**2),
        ("1G", 1024**3),
        ("2T", 2 * 1024**4),
        (" 3kib ", 3 * 1024),
        ("4KB", 4 * 1024),
        ("5b", 5),
    ],
)
def test_byte_counts(text: str, count: int) -> None:
    assert ByteCount().convert(text, None, None) == count


@pytest.mark.parametrize("text", ["", "K", "12X", "1.5M", "-1", "ten"])
def test_not_byte_counts(text: str) -> None:
    with pytest.raises(click.BadParameter, match="is not a byte count"):
        ByteCount().convert(text, None, None)


@pytest.mark.parametrize(
    ("delay", "text"),
    [(1800.0, "5 x 2, 30m"), (7200.0, "5 x 2, 2h"), (90.0, "5 x 2, 90s"), (0.5, "5 x 2, 0.5s")],
)
def test_retry_text(delay: float, text: str) -> None:
    assert retry_text(dataclasses.replace(ORDERS, retry_delay=delay)) == text
    assert retry_text(dataclasses.replace(ORDERS, retry_count=None, retry_delay=None)) == ""


def test_queue_json() -> None:
    assert queue_json(ORDERS) == {
        "name": "orders",
        "format_name": ".\\private$\\orders",
        "kind": "normal",
        "transactional": True,
        "journal": False,
        "quota": 10 * 1024**2,
        "depth": 3,
        "bytes": 1536,
        "locked": 1,
        "created_at": "2024-01-02T03:04:05.000000+00:00",
        "retry_count": 5,
        "retry_cycles": 2,
        "retry_delay": 1800.0,
    }


def test_queue_table_prints_names_as_text() -> None:
    console = Console(width=200, record=True)
    named = dataclasses.replace(ORDERS, name="[bold]x[/]", quota=None, retry_count=None)
    console.print(queue_table([ORDERS, named]))
    header, _, orders, markup = console.export_text().splitlines()
    assert header.split() == [
        "queue", "┃", "kind", "┃", "tx", "┃", "journal", "┃", "depth", "┃", "bytes", "┃",
        "locked", "┃", "quota", "┃", "retries",
    ]  # fmt: skip
    assert [cell.strip() for cell in orders.split("│")] == [
        "orders", "normal", "yes", "", "3", "1536", "1", "10.0 MiB", "5 x 2, 30m",
    ]  # fmt: skip
    assert markup.split("│")[0].strip() == "[bold]x[/]"


def test_a_name_with_characters_that_do_not_print_is_shown_escaped() -> None:
    """A right-to-left override or a zero-width space in a name would make one queue
    pass for another in a listing (``rtl\u202etxt.exe`` reads ``rtlexe.txt``)."""
    console = Console(width=200, record=True)
    names = ["rtl\u202etxt.exe", "zw\u200bsp", "zwsp", "café"]
    console.print(queue_table([dataclasses.replace(ORDERS, name=name) for name in names]))
    shown = [line.split("│")[0].strip() for line in console.export_text().splitlines()[2:]]
    assert shown == ["'rtl\\u202etxt.exe'", "'zw\\u200bsp'", "zwsp", "café"]


def test_find_queue_takes_any_spelling() -> None:
    class Listing:
        def list_queues(self) -> list[QueueInfo]:
            return [
                dataclasses.replace(ORDERS, name="other", format_name=".\\private$\\other"),
                ORDERS,
            ]

    qm = Listing()
    for name in ("orders", "ORDERS", ".\\private$\\orders", "private$\\Orders"):
        assert find_queue(qm, name) is ORDERS  # type: ignore[arg-type]
    with pytest.raises(common.CliError) as missing:
        find_queue(qm, "nowhere")  # type: ignore[arg-type]
    assert (missing.value.message, missing.value.hint) == (
        "queue 'nowhere' does not exist",
        "`qmgr queue list` shows the queues",
    )


# --------------------------------------------------------------------------
# The commands
# --------------------------------------------------------------------------


def test_create_says_what_it_made(shared_daemon: DaemonProcess, queue_name: str) -> None:
    made = ok(run(shared_daemon, "queue", "create", queue_name, "--transactional"))
    assert made.stdout == f"created transactional queue {queue_name!r}\n"
    poisoned = f"{queue_name}-p"
    made = ok(run(shared_daemon, "queue", "create", poisoned, "--retry-delay", "60"))
    assert made.stdout == f"created queue {poisoned!r} with poison handling\n"
    bad = run(shared_daemon, "queue", "create", f"{queue_name}-q", "--quota", "12X")
    assert bad.exit_code == 2
    assert "'12X' is not a byte count" in bad.stderr
    # A path name: the queue is named as `queue list` shows it.
    for spelling in ("private$\\", ".\\PRIVATE$\\"):
        pathed = f"{queue_name}-Path{len(spelling)}"
        made = ok(run(shared_daemon, "queue", "create", spelling + pathed))
        assert made.stdout == f"created queue {pathed!r}\n"
        listed = json.loads(ok(run(shared_daemon, "queue", "list", "--json")).stdout)
        assert pathed in [entry["name"] for entry in listed]


def test_show(shared_daemon: DaemonProcess, queue_name: str) -> None:
    ok(run(shared_daemon, "queue", "create", queue_name, "--journal", "--quota", "1K"))
    ok(run(shared_daemon, "send", queue_name, "--body", "12345"))
    rows = ok(run(shared_daemon, "queue", "show", queue_name)).stdout.splitlines()
    shown = {key.strip(): value.strip() for key, value in (row.split("│") for row in rows)}
    assert shown.pop("created").endswith("+00:00")
    assert shown == {
        "queue": queue_name,
        "format name": f".\\private$\\{queue_name}",
        "kind": "normal",
        "transactional": "no",
        "journal": "yes",
        "quota": "1.0 KiB",
        "messages": "1 (5 B), 0 locked",
        "poison handling": "off",
        "subqueue ;retry": "0 messages",
        "subqueue ;poison": "0 messages",
    }
    data = json.loads(ok(run(shared_daemon, "queue", "show", queue_name, "--json")).stdout)
    assert (data["name"], data["depth"], data["retry_count"]) == (queue_name, 1, None)
    assert [s["name"] for s in data["subqueues"]] == [f"{queue_name};retry", f"{queue_name};poison"]
    journal = ok(run(shared_daemon, "queue", "show", f"{queue_name};journal")).stdout
    assert "poison handling" not in journal
    missing = run(shared_daemon, "queue", "show", f"{queue_name}-none")
    assert missing.exit_code == 1
    assert "hint: `qmgr queue list` shows the queues" in missing.stderr


def test_list(shared_daemon: DaemonProcess, queue_name: str) -> None:
    ok(run(shared_daemon, "queue", "create", queue_name, "--retry-count", "3"))
    listed = json.loads(ok(run(shared_daemon, "queue", "list", "--json")).stdout)
    [mine] = [q for q in listed if q["name"] == queue_name]
    assert (mine["retry_count"], mine["retry_cycles"], mine["retry_delay"]) == (3, 2, 1800.0)
    table = ok(run(shared_daemon, "queue", "list")).stdout
    row = next(line for line in table.splitlines() if line.startswith(queue_name + " "))
    assert row.split("│")[-1].strip() == "3 x 2, 30m"


def test_delete_and_purge_ask_first_on_a_terminal(
    shared_daemon: DaemonProcess, queue_name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    ok(run(shared_daemon, "queue", "create", queue_name))
    ok(run(shared_daemon, "send", queue_name, "--body", "x", "--count", "2"))
    monkeypatch.setattr(common, "interactive", lambda: True)
    kept = run(shared_daemon, "queue", "purge", queue_name, input="n\n")
    assert kept.exit_code == 1
    assert f"Delete every message in {queue_name!r}? [y/N]" in kept.stderr
    purged = ok(run(shared_daemon, "queue", "purge", queue_name, input="y\n"))
    assert purged.stdout == f"purged 2 messages from {queue_name!r}\n"
    ok(run(shared_daemon, "send", queue_name, "--body", "x"))
    kept = run(shared_daemon, "queue", "delete", queue_name, input="n\n")
    assert kept.exit_code == 1
    assert "its journal queue, its subqueues and all their messages? [y/N]" in kept.stderr
    deleted = ok(run(shared_daemon, "queue", "delete", queue_name, "--yes"))
    assert deleted.stdout == f"deleted queue {queue_name!r} (1 message)\n"


@pytest.mark.parametrize("delay", ["inf", "4294967296", "-1", "nan"])
@pytest.mark.parametrize("command", ["create", "set"])
def test_a_retry_delay_out_of_range_is_a_usage_error(command: str, delay: str) -> None:
    # Refused before connecting: with no daemon to reach, the usage error is all.
    result = run(None, "queue", command, "orders", "--retry-delay", delay)
    assert result.exit_code == 2
    assert "Invalid value for '--retry-delay'" in result.stderr
