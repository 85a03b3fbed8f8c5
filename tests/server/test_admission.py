"""Per-address admission of client connections, with explicit times."""

from __future__ import annotations

from qmgr.server.admission import MAX_TRACKED, WINDOW, Admission, AdmissionLimits

LIMITS = AdmissionLimits(max_connections_per_address=2, failure_limit=3, failure_delay=2.0)


def test_connections_per_address_are_bounded() -> None:
    admission = Admission(LIMITS)
    for _ in range(2):
        assert admission.refusal("10.0.0.1") is None
        admission.opened("10.0.0.1")
    refusal = admission.refusal("10.0.0.1")
    assert refusal is not None
    assert "at most 2" in refusal
    assert admission.refusal("10.0.0.2") is None  # another host is not held up
    admission.closed("10.0.0.1")
    assert admission.refusal("10.0.0.1") is None
    admission.closed("10.0.0.1")
    assert admission.connections("10.0.0.1") == 0


def test_repeated_failures_slow_an_address_down_for_a_minute() -> None:
    admission = Admission(LIMITS)
    for second in (0.0, 1.0):
        admission.failed("10.0.0.1", second)
        assert admission.delay("10.0.0.1", second) == 0.0
    admission.failed("10.0.0.1", 2.0)
    assert admission.delay("10.0.0.1", 2.0) == 2.0
    assert admission.delay("10.0.0.2", 2.0) == 0.0
    # The first failure leaves the window: two remain, under the limit.
    assert admission.delay("10.0.0.1", WINDOW + 0.5) == 0.0
    assert admission.delay("10.0.0.1", WINDOW + 5.0) == 0.0


def test_failures_are_remembered_for_a_bounded_number_of_addresses() -> None:
    admission = Admission(LIMITS)
    for index in range(MAX_TRACKED + 10):
        admission.failed(f"host-{index}", 0.0)
    assert len(admission._failures) == MAX_TRACKED
    assert "host-0" not in admission._failures
