"""Idle transactions are aborted; a full store answers STORE_FULL and loses nothing."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from helpers import DaemonProcess

from qmgr.client import StoreFull, TransactionAborted, connect


def _config(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "qmgr.toml"
    path.write_text(text, encoding="utf-8")
    return path


def test_an_idle_transaction_is_aborted_and_its_messages_come_back(
    tmp_path: Path, daemon_factory: Callable[..., DaemonProcess]
) -> None:
    config = _config(tmp_path, "[transactions]\nidle_timeout = 0.5\n")
    daemon = daemon_factory(extra_args=["--config", str(config)])
    with connect(daemon.address) as qm:
        qm.create_queue("idle", transactional=True)
        qm.send("idle", b"held")
        tx = qm.begin()
        held = tx.receive("idle")
        assert held is not None
        assert qm.peek("idle") is None
        # The daemon gives up on the transaction: the message is visible again
        # (the peek waits for exactly that)...
        assert qm.peek("idle", timeout=10.0) is not None
        # ...and the transaction says why when it is used again.
        with pytest.raises(TransactionAborted, match="idle"):
            tx.commit()
    assert "idle timeout" in daemon.log()


def test_a_full_store_refuses_writes_and_keeps_serving(
    tmp_path: Path, daemon_factory: Callable[..., DaemonProcess]
) -> None:
    config = _config(tmp_path, "[store]\ninitial_map_size = 1048576\nmax_map_size = 4194304\n")
    daemon = daemon_factory(extra_args=["--config", str(config)])
    body = b"x" * (256 * 1024)
    with connect(daemon.address) as qm:
        qm.create_queue("full", transactional=True)
        stored = 0
        with pytest.raises(StoreFull):
            for _ in range(100):
                qm.send("full", body)
                stored += 1
        assert 0 < stored < 100
        # Nothing of the failed send is there, everything before it is, and
        # the daemon still serves reads and writes that fit.
        messages = qm.peek_range("full", max=1000)
        assert len(messages) == stored
        assert all(m.body == body for m in messages)
        assert qm.receive("full") is not None
        qm.send("full", b"small")
        assert qm.peek_range("full", max=1000)[-1].body == b"small"
    daemon.stop()
    daemon.start()
    with connect(daemon.address) as qm:
        assert len(qm.peek_range("full", max=1000)) == stored
