"""Message-id ordinals (``qmgr.core.ordinals``): handed out below the durable
limit, reserved a block ahead, never reused across a crash."""

from __future__ import annotations

import pytest

from qmgr.core.errors import LimitExceeded, ShuttingDown, StoreFull
from qmgr.core.ordinals import BLOCK, OrdinalAllocator

from .conftest import OpenCore
from .harness import CoreHarness


@pytest.fixture
def qm(open_core: OpenCore) -> CoreHarness:
    return open_core({"tq": {"transactional": True}})


def test_ordinals_are_handed_out_below_the_durable_limit() -> None:
    ordinals = OrdinalAllocator(100)
    assert ordinals.wanted
    with pytest.raises(LimitExceeded):
        ordinals.take()  # nothing is durable above 100 yet
    limit = ordinals.reservation()
    assert limit == 100 + BLOCK
    assert not ordinals.wanted  # asked already
    assert ordinals.reservation() is None
    ordinals.reserved(limit)
    assert [ordinals.take() for _ in range(3)] == [100, 101, 102]
    assert not ordinals.wanted


def test_giving_back_closes_the_allocator_at_the_count_it_reached() -> None:
    ordinals = OrdinalAllocator(100)
    ordinals.reserved(100 + BLOCK)
    assert [ordinals.take() for _ in range(3)] == [100, 101, 102]
    assert ordinals.give_back() == 103
    with pytest.raises(ShuttingDown):
        ordinals.take()
    assert not ordinals.wanted
    assert ordinals.reservation() is None
    # One whose reservation lands late asks for nothing more, and gives back all.
    late = OrdinalAllocator(5)
    assert late.reservation() == 5 + BLOCK
    assert late.give_back() is None  # nothing reserved is durable, nothing to give
    late.reserved(5 + BLOCK)
    assert late.give_back() == 5


def test_a_failed_reservation_is_asked_again() -> None:
    ordinals = OrdinalAllocator(0)
    assert ordinals.reservation() == BLOCK
    ordinals.reservation_failed()
    assert ordinals.wanted
    assert ordinals.reservation() == BLOCK


def test_with_no_id_left_a_send_gets_the_reservation_s_failure() -> None:
    ordinals = OrdinalAllocator(0)
    with pytest.raises(LimitExceeded, match="being reserved"):
        ordinals.take()  # none written yet: retrying may succeed
    ordinals.reservation()
    ordinals.reservation_failed(StoreFull("the store is full: no room"))
    with pytest.raises(StoreFull) as refused:
        ordinals.take()
    assert str(refused.value) == (
        "no message id is free: reserving more failed: the store is full: no room"
    )
    ordinals.reservation_failed()  # failed again, cause unknown: the last cause stays
    with pytest.raises(StoreFull):
        ordinals.take()
    ordinals.reserved(ordinals.reservation() or 0)
    assert ordinals.take() == 1


def test_a_new_block_is_wanted_before_the_last_runs_out() -> None:
    ordinals = OrdinalAllocator(0)
    ordinals.reserved(BLOCK)
    assert ordinals.take() == 1  # 0 is never an ordinal
    for _ in range(BLOCK // 2 - 2):
        ordinals.take()
    assert not ordinals.wanted
    ordinals.take()
    assert ordinals.wanted
    assert ordinals.reservation() == 2 * BLOCK


def test_ordinals_wrap_at_32_bits_and_skip_zero() -> None:
    ordinals = OrdinalAllocator(0xFFFFFFFF)
    ordinals.reserved(0xFFFFFFFF + BLOCK)
    assert [ordinals.take() for _ in range(3)] == [0xFFFFFFFF, 1, 2]


def test_message_ids_are_unique_across_crashes(qm: CoreHarness) -> None:
    ids = {qm.message_id("tq") for _ in range(3)}
    qm.crash()
    ids |= {qm.message_id("tq") for _ in range(3)}
    assert len(ids) == 6


def test_message_ids_are_reserved_ahead_and_never_run_past_the_reservation(
    qm: CoreHarness,
) -> None:
    ordinals = qm.core.ordinals
    assert not qm.core.reservation_wanted
    # Use up the reserved block without writing a new reservation.
    ordinals._next = ordinals.durable_limit - 1
    assert qm.core.reservation_wanted
    qm.prepare("tq", b"last one")
    with pytest.raises(LimitExceeded, match="retry"):
        qm.prepare("tq", b"one too many")
    qm.reserve_ordinals()
    qm.prepare("tq", b"fine again")
