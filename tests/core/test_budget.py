"""Memory budgets (``qmgr.core.budget``): a daemon-wide bound on bytes held for clients."""

from __future__ import annotations

import pytest

from qmgr.core.budget import MemoryBudget


def test_reservations_are_refused_past_the_limit_and_reserve_nothing() -> None:
    budget = MemoryBudget(100, what="frames being received")
    assert budget.try_reserve(60)
    assert not budget.try_reserve(41)
    assert budget.in_use == 60
    assert budget.try_reserve(40)
    assert budget.in_use == 100
    budget.release(70)
    assert budget.in_use == 30
    budget.release(1000)  # never below nothing
    assert budget.in_use == 0


def test_a_refusal_says_which_budget_and_how_full() -> None:
    budget = MemoryBudget(100, what="frames being received")
    budget.try_reserve(90)
    text = budget.refusal(20)
    assert "90 bytes of frames being received" in text
    assert "20 more" in text
    assert "limit of 100" in text
    assert text.endswith("; retry later")


def test_what_can_never_fit_is_not_told_to_retry() -> None:
    budget = MemoryBudget(100, what="frames being received")
    assert budget.refusal(101) == (
        "101 bytes of frames being received are more than the queue manager's limit of "
        "100 for all its clients together"
    )


def test_a_budget_has_a_positive_limit() -> None:
    with pytest.raises(ValueError, match="must be positive"):
        MemoryBudget(0, what="messages in open transactions")
