"""``qmgr restored`` in-process, on a store the test makes: what it prints, and
what it refuses (no store, a running queue manager, a bad configuration). The
daemons on either side of a restore run in ``tests/integration/test_restore_from_backup.py``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import storage
from storage.ops.restore import ORDINAL_SPREAD

from .kit import run


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    """A stopped queue manager's data directory with one outgoing queue."""
    path = tmp_path / "qm"
    with storage.Store(path) as store:
        append = storage.AppendOutgoing("outgoing$;tcp:10.0.0.5:1801\\orders", "orders", b"x", 1)
        [outcome] = store.commit([storage.Unit((append,))], now=1.0)
        assert outcome.error is None
    return path


def test_it_says_what_it_changed(data_dir: Path) -> None:
    with storage.Store(data_dir) as store:
        [before] = store.outgoing_states().values()
        limit = store.ordinal_limit
    result = run(None, "restored", "--data-dir", str(data_dir))
    assert result.exit_code == 0, result.stderr
    assert result.stdout.splitlines() == [
        f"{data_dir}: ready to start in place of the original",
        "  outgoing queues that go on as new streams: 1",
        "  kept sequences of removed outgoing queues dropped: 0",
        "  incoming streams that take their next message: 0",
        "  queues whose next lookup ids move on: 0",
    ]
    with storage.Store(data_dir) as store:
        [after] = store.outgoing_states().values()
        assert after.sequence_timestamp > before.sequence_timestamp
        jump = store.ordinal_limit - limit  # half the space, and the restore's own spread
        assert storage.ORDINAL_JUMP <= jump < storage.ORDINAL_JUMP + ORDINAL_SPREAD
    again = run(None, "restored", "--data-dir", str(data_dir))
    assert again.exit_code == 0, again.stderr
    assert again.stdout == (
        f"{data_dir}: prepared already, and not started since: nothing changed\n"
    )


def test_json_for_scripts(data_dir: Path) -> None:
    result = run(None, "restored", "--set", f'server.data_dir="{data_dir}"', "--json")
    assert result.exit_code == 0, result.stderr
    found = json.loads(result.stdout)
    assert found["data_dir"] == str(data_dir)
    assert (found["already"], found["in_doubt"]) == (False, [])
    assert (found["outgoing_queues"], found["retired_sequences"], found["incoming_streams"]) == (
        1,
        0,
        0,
    )
    assert found["ordinal_limit"] > storage.ORDINAL_JUMP


def test_transactions_in_doubt_are_a_warning(data_dir: Path) -> None:
    with storage.Store(data_dir) as store:
        prepare = storage.PrepareTransaction("xid-1", (), (), created_at=1.0)
        assert store.commit([storage.Unit((prepare,))], now=1.0)[0].error is None
    result = run(None, "restored", "--data-dir", str(data_dir))
    assert result.exit_code == 0
    assert result.stderr.startswith("warning: 1 prepared transaction(s) in doubt")
    assert result.stderr.rstrip().endswith(": xid-1")


def test_a_directory_without_a_store_is_refused_and_left_empty(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    result = run(None, "restored", "--data-dir", str(empty))
    assert result.exit_code == 1
    assert result.stderr.splitlines() == [
        f"error: no store in {empty}: restore the backup into the data directory first"
    ]
    assert not empty.exists()


def test_a_running_queue_manager_is_left_alone(data_dir: Path) -> None:
    with storage.Store(data_dir) as store:  # as a daemon holds it
        states = store.outgoing_states()
        result = run(None, "restored", "--data-dir", str(data_dir))
        assert result.exit_code == 1
        assert f"error: a queue manager is running on {data_dir}: stop it first" in result.stderr
    with storage.Store(data_dir) as store:
        assert store.outgoing_states() == states


def test_a_configuration_error_exits_2(data_dir: Path) -> None:
    result = run(None, "restored", "--data-dir", str(data_dir), "--set", "server.nmae=1")
    assert result.exit_code == 2
    assert result.stderr.splitlines() == ["error: --set: unknown key server.nmae"]
