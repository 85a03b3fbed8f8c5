"""The batch's undoable state (``storage.overlay``): savepoints over the write
list, the changes and the scratch state, and the queue states they copy."""

from __future__ import annotations

from typing import Any, cast

import lmdb
import pytest

from storage import QueueKind, QueueRecord
from storage.overlay import DISCARD, MISSING, PUT, Overlay, QueueState

#: A database handle: the overlay only keeps it in its writes.
DB = cast("lmdb._Database", object())
OTHER = cast("lmdb._Database", object())


def record() -> QueueRecord:
    fields: dict[str, Any] = {
        "name": "q",
        "display_name": "Q",
        "kind": QueueKind.NORMAL,
        "created_at": 1.0,
    }
    return QueueRecord(
        queue_id=3, transactional=False, next_lookup_id=5, depth=4, bytes=40, **fields
    )


def test_a_rolled_back_savepoint_undoes_its_writes_changes_and_scratch() -> None:
    overlay = Overlay()
    changes: dict[Any, Any] = {}
    overlay.change(changes, "kept", 1)
    overlay.put(DB, b"a", b"1")
    with overlay.savepoint() as savepoint:
        overlay.change(changes, "kept", 2)
        overlay.change(changes, "new", 3)
        overlay.discard(DB, b"b")
        overlay.set_scratch("s", 4)
        assert overlay.scratch("s") == 4
        savepoint.roll_back()
    assert changes == {"kept": 1}
    assert overlay.writes == [(PUT, DB, b"a", b"1")]
    assert overlay.scratch("s") is MISSING


def test_an_exception_in_a_savepoint_rolls_it_back_and_propagates() -> None:
    overlay = Overlay()
    changes: dict[Any, Any] = {"kept": 1}
    with pytest.raises(KeyError), overlay.savepoint():
        overlay.change(changes, "kept", 2)
        overlay.put(DB, b"a", b"1")
        raise KeyError("x")
    assert changes == {"kept": 1}
    assert overlay.writes == []


def test_a_savepoint_that_ends_hands_what_it_would_undo_to_the_enclosing_one() -> None:
    overlay = Overlay()
    changes: dict[Any, Any] = {}
    with overlay.savepoint() as outer:
        with overlay.savepoint():
            overlay.change(changes, "inner", 1)
            overlay.put(DB, b"a", b"1")
        assert changes == {"inner": 1}
        outer.roll_back()
    assert changes == {}
    assert overlay.writes == []


def test_remember_notes_a_key_once_per_savepoint() -> None:
    overlay = Overlay()
    changes: dict[Any, Any] = {"k": 1}
    with overlay.savepoint() as savepoint:
        assert overlay.remember(changes, "k")
        changes["k"] = 2  # changed in place, as the context does with a queue state
        assert not overlay.remember(changes, "k")
        with overlay.savepoint():
            assert overlay.remember(changes, "k")
        savepoint.roll_back()
    assert changes == {"k": 1}


def test_drop_write_takes_every_write_of_one_key_out() -> None:
    overlay = Overlay()
    overlay.put(DB, b"a", b"1")
    overlay.put(OTHER, b"a", b"2")
    overlay.discard(DB, b"b")
    overlay.put(DB, b"a", b"3")
    overlay.drop_write(DB, b"a")
    assert overlay.writes == [(PUT, OTHER, b"a", b"2"), (DISCARD, DB, b"b", b"")]


def test_a_queue_state_copy_is_independent_and_its_final_record_has_its_counters() -> None:
    state = QueueState(record())
    assert state.final_record() is state.record
    clone = state.copy()
    clone.depth -= 1
    clone.bytes -= 10
    clone.purged_below = 2
    clone.erasing = True
    assert (state.depth, state.bytes) == (4, 40)
    final = clone.final_record()
    assert (final.next_lookup_id, final.depth, final.bytes) == (5, 3, 30)
    assert (final.purged_below, final.erasing) == (2, True)
    assert final.name == "q"
