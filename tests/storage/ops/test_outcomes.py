"""Kept outcomes (``storage.ops.outcomes``): the outcome record, and pruning the
oldest in bounded steps."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from store_kit import (
    commit_ok,
    only,
    prepare,
    raw_lmdb,
    run,
    times,
    unit,
)

from storage import (
    Done,
    OutcomeInfo,
    Prepared,
    Pruned,
    PruneOutcomes,
    RecordOutcome,
    Store,
    StoreCorrupt,
)
from storage.keys import DB_OUTCOME_TIMES
from storage.ops.outcomes import decode_outcome, encode_outcome

# --------------------------------------------------------------------------- outcomes


def test_outcomes_are_pruned_oldest_first_in_bounded_steps(store: Store) -> None:
    for i in range(8):
        run(store, RecordOutcome(f"x{7 - i}", committed=i % 2 == 0, resolved_at=100.0 + i))
    # Outcomes resolved before 105 (to the millisecond): 100..104, five of them.
    steps = [only(commit_ok(store, unit(PruneOutcomes(105.0, 2)))[0]) for _ in range(4)]
    assert steps == [Pruned(2, False), Pruned(2, False), Pruned(1, True), Pruned(0, True)]
    assert [(o.xid, o.resolved_at) for o in store.outcomes()] == [
        ("x0", 107.0),
        ("x1", 106.0),
        ("x2", 105.0),
    ]
    # A pruned xid may be used again.
    assert run(store, prepare("x7")) == [Prepared("x7")]
    assert run(store, PruneOutcomes(1e12, 0)) == [Pruned(0, False)]


def test_prunes_in_one_batch_do_not_count_an_outcome_twice(store: Store) -> None:
    for i in range(3):
        run(store, RecordOutcome(f"x{i}", committed=True, resolved_at=10.0 + i))
    outcomes = commit_ok(
        store,
        unit(PruneOutcomes(100.0, 2)),
        unit(RecordOutcome("new", committed=True, resolved_at=1.0)),
        unit(PruneOutcomes(100.0, 5)),
    )
    assert [only(outcome) for outcome in outcomes] == [Pruned(2, False), Done(), Pruned(1, True)]
    assert [o.xid for o in store.outcomes()] == ["new"]  # recorded in the batch: left
    assert run(store, PruneOutcomes(100.0, 5)) == [Pruned(1, True)]
    assert store.outcomes() == []
    store.close()
    with raw_lmdb(store.path) as env:
        times = env.open_db(DB_OUTCOME_TIMES, create=False)
        with env.begin() as txn:
            assert list(txn.cursor(db=times)) == []


# --------------------------------------------------------------------------- the outcome record


@given(st.booleans(), times)
def test_outcome_round_trips(committed: bool, resolved_at: float) -> None:
    data = encode_outcome(committed, resolved_at)
    assert len(data) == 9
    assert decode_outcome("x", data) == OutcomeInfo("x", committed, resolved_at)
    for bad in (data[:-1], b"\x00" + data[1:], b"\x03" + data[1:]):
        with pytest.raises(StoreCorrupt):
            decode_outcome("x", bad)
