"""``qmgr queue set`` and ``qmgr move`` between a queue and its subqueues, and of dead
letters back to their queues (``qmgr/cli/poison.py``), against the session's real
queue manager.

How messages become poison is in ``tests/integration/test_poison.py``.
"""

from __future__ import annotations

import json

import pytest
from helpers import DaemonProcess, wait_until

from qmgr.cli.poison import is_subqueue_move
from qmgr.client import connect

from .kit import ok, run, sent_id


@pytest.mark.parametrize(
    ("source", "destination", "subqueue"),
    [
        ("orders;poison", "orders", True),
        ("orders", "orders;retry", True),
        ("ORDERS;POISON", "orders", True),
        ("orders", "billing", False),
        ("orders;journal", "orders", False),
        ("system$;deadxact", "orders", False),
    ],
)
def test_is_subqueue_move(source: str, destination: str, subqueue: bool) -> None:
    assert is_subqueue_move(source, destination) is subqueue


def test_set_needs_something_to_change() -> None:
    result = run(None, "queue", "set", "orders")
    assert result.exit_code == 2
    assert "nothing to change: give --retry-count, --retry-cycles" in result.stderr
    assert "--quota or --no-quota" in result.stderr
    quotas = run(None, "queue", "set", "orders", "--quota", "1M", "--no-quota")
    assert quotas.exit_code == 2
    assert "give --quota or --no-quota, not both" in quotas.stderr
    bad = run(None, "queue", "set", "orders", "--quota", "lots")
    assert bad.exit_code == 2
    assert "is not a byte count" in bad.stderr
    both = run(None, "queue", "set", "orders", "--no-poison", "--retry-count", "5")
    assert both.exit_code == 2  # a usage error, found before connecting
    assert "--no-poison turns poison handling off: give no retry option with it" in both.stderr


def test_set_says_what_the_queue_does_now(shared_daemon: DaemonProcess, queue_name: str) -> None:
    ok(run(shared_daemon, "queue", "create", queue_name))
    on = ok(run(shared_daemon, "queue", "set", queue_name, "--retry-delay", "3600"))
    assert on.stdout == f"{queue_name}: poison handling on (5 x 2, 1h)\n"
    changed = ok(run(shared_daemon, "queue", "set", queue_name, "--retry-count", "1"))
    assert changed.stdout == f"{queue_name}: poison handling on (1 x 2, 1h)\n"
    off = ok(run(shared_daemon, "queue", "set", queue_name, "--no-poison"))
    assert off.stdout == f"{queue_name}: poison handling off\n"
    again = ok(run(shared_daemon, "queue", "set", queue_name, "--poison"))
    assert again.stdout == f"{queue_name}: poison handling on (5 x 2, 30m)\n"
    missing = run(shared_daemon, "queue", "set", f"{queue_name}-none", "--no-poison")
    assert missing.exit_code == 1
    assert missing.stderr.startswith("error: ")


def test_set_changes_the_quota_of_a_full_queue(
    shared_daemon: DaemonProcess, queue_name: str
) -> None:
    ok(run(shared_daemon, "queue", "create", queue_name, "--quota", "1"))
    ok(run(shared_daemon, "send", queue_name, "--body", "x"))
    full = run(shared_daemon, "send", queue_name, "--body", "y")
    assert full.exit_code == 1
    assert "quota" in full.stderr
    raised = ok(run(shared_daemon, "queue", "set", queue_name, "--quota", "1K"))
    assert raised.stdout == f"{queue_name}: quota 1.0 KiB\n"
    ok(run(shared_daemon, "send", queue_name, "--body", "y"))
    both = ok(run(shared_daemon, "queue", "set", queue_name, "--no-quota", "--retry-count", "1"))
    assert both.stdout == (
        f"{queue_name}: poison handling on (1 x 2, 30m)\n{queue_name}: no quota\n"
    )
    as_json = ok(run(shared_daemon, "queue", "set", queue_name, "--quota", "0", "--json"))
    shown = json.loads(as_json.stdout)
    assert (shown["name"], shown["quota"], shown["depth"], shown["bytes"]) == (queue_name, 0, 2, 2)
    assert shown["retry_count"] == 1
    # Below what it holds: refused until enough is received.
    refused = run(shared_daemon, "send", queue_name, "--body", "")
    assert refused.exit_code == 1
    assert "quota" in refused.stderr
    journal = run(shared_daemon, "queue", "set", f"{queue_name};journal", "--quota", "1")
    assert journal.exit_code == 1
    assert "no quota of its own" in journal.stderr


def test_moves_keep_the_message_and_say_where_it_went(
    shared_daemon: DaemonProcess, queue_name: str
) -> None:
    q, poison = queue_name, f"{queue_name};poison"
    ok(run(shared_daemon, "queue", "create", q))
    ids = [sent_id(shared_daemon, q, body) for body in "ab"]
    one = ok(run(shared_daemon, "move", q, poison))
    assert one.stdout.startswith(f"moved 1 message from {q} to {poison} (lookup id ")
    assert one.stderr == ""
    rest = ok(run(shared_daemon, "move", q, poison, "--all"))
    assert rest.stdout.startswith(f"moved 1 message from {q} to {poison} (lookup id ")
    back = ok(run(shared_daemon, "move", poison, q, "--count", "3"))
    assert back.stdout.startswith(f"moved 2 messages from {poison} to {q} (the last one is ")
    assert back.stderr == "note: moved 2 of 3 messages (no more)\n"
    peeked = [
        json.loads(line)
        for line in ok(run(shared_daemon, "peek", q, "--count", "2", "--json")).stdout.splitlines()
    ]
    assert [(m["id"], m["move_count"]) for m in peeked] == [(ids[0], 2), (ids[1], 2)]
    lookup = str(peeked[1]["lookup_id"])
    moved = ok(run(shared_daemon, "move", q, poison, "--lookup-id", lookup))
    assert moved.stdout.startswith(f"moved 1 message from {q} to {poison}")
    gone = run(shared_daemon, "move", q, poison, "--lookup-id", lookup)
    assert gone.exit_code == 1
    assert gone.stderr == f"error: message {lookup} is not in {q!r} (or a transaction holds it)\n"
    ok(run(shared_daemon, "move", q, poison, "--all"))  # the other one
    nothing = ok(run(shared_daemon, "move", q, poison, "--all"))
    assert nothing.stdout == f"moved 0 messages from {q} to {poison}\n"
    assert nothing.stderr == ""  # no "of N" note for --all


def test_a_move_of_all_says_what_stays_behind(
    shared_daemon: DaemonProcess, queue_name: str
) -> None:
    q, poison = queue_name, f"{queue_name};poison"
    ok(run(shared_daemon, "queue", "create", q, "--transactional"))
    for body in ("first", "second"):
        sent_id(shared_daemon, q, body)
    ok(run(shared_daemon, "move", q, poison, "--all"))
    with connect(shared_daemon.address) as qm, qm.begin() as tx:
        assert tx.receive(poison) is not None  # held
        back = ok(run(shared_daemon, "move", poison, q, "--all"))
        tx.abort()
    assert back.stdout.startswith(f"moved 1 message from {poison} to {q} (lookup id ")
    assert back.stderr == (
        f"note: 1 message stays in {poison} (held by a transaction, no room in the store, "
        "or arrived since the move began)\n"
    )


@pytest.mark.parametrize(
    "spelling",
    ["{q};poison", ".\\private$\\{q};poison", "DIRECT=OS:.\\private$\\{q};poison"],
    ids=["plain", "path", "direct"],
)
def test_a_move_of_all_works_whatever_the_sources_spelling(
    shared_daemon: DaemonProcess, queue_name: str, spelling: str
) -> None:
    q = queue_name
    ok(run(shared_daemon, "queue", "create", q, "--transactional"))
    sent_id(shared_daemon, q, "first")
    ok(run(shared_daemon, "move", q, f"{q};poison", "--all"))
    source = spelling.format(q=q)
    back = ok(run(shared_daemon, "move", source, q, "--all"))
    assert back.stdout.startswith(f"moved 1 message from {source} to {q}")
    assert "first" in ok(run(shared_daemon, "peek", q)).stdout


def test_a_dead_letter_moves_back_with_its_id(
    shared_daemon: DaemonProcess, queue_name: str
) -> None:
    ok(run(shared_daemon, "queue", "create", queue_name))
    sent = sent_id(shared_daemon, queue_name, "late", "--ttbr", "1", "--journal", "deadletter")
    dead = "system$;deadletter"
    found: list[dict[str, object]] = []

    def kept() -> bool:
        page = ok(run(shared_daemon, "peek", dead, "--count", "10000", "--json")).stdout
        found[:] = [m for m in map(json.loads, page.splitlines()) if m["id"] == sent]
        return bool(found)

    wait_until(kept, timeout=30)
    [copy] = found
    assert copy["message_class"] != 0
    moved = ok(run(shared_daemon, "move", dead, "--back", "--lookup-id", str(copy["lookup_id"])))
    assert moved.stdout.startswith(f"moved 1 message from {dead} back to its queue (lookup id ")
    back = json.loads(ok(run(shared_daemon, "receive", queue_name, "--json")).stdout)
    assert (back["id"], back["body"], back["move_count"]) == (sent, "late", 1)
    assert back["message_class"] == 0
    again = run(shared_daemon, "move", dead, "--back", "--lookup-id", str(copy["lookup_id"]))
    assert again.exit_code == 1
    assert "is not in 'system$;deadletter'" in again.stderr
