"""Per-address admission of client connections, unauthenticated budgets and
failures, with explicit times."""

from __future__ import annotations

from qmgr.server.admission import (
    MAX_TRACKED,
    WINDOW,
    Admission,
    AdmissionLimits,
    Arrival,
    Ticket,
)

LIMITS = AdmissionLimits(
    max_connections_per_address=4,
    failure_limit=3,
    failure_delay=2.0,
    max_unauthenticated_per_address=3,
    max_unauthenticated=5,
)


def arrive(admission: Admission, address: str, now: float = 0.0) -> Arrival:
    arrival = admission.arrive(address, now)
    assert isinstance(arrival, Arrival), arrival
    return arrival


def authenticated(admission: Admission, address: str) -> Ticket:
    ticket = arrive(admission, address).ticket
    admission.authenticated(ticket)
    return ticket


def test_authenticated_connections_per_address_are_bounded() -> None:
    admission = Admission(LIMITS)
    tickets = [authenticated(admission, "10.0.0.1") for _ in range(4)]
    refusal = admission.arrive("10.0.0.1", 0.0)
    assert isinstance(refusal, str)
    assert "at most 4" in refusal
    assert isinstance(admission.arrive("10.0.0.2", 0.0), Arrival)  # another host is not held up
    admission.closed(tickets[0])
    admission.closed(tickets[0])  # twice counts once
    assert admission.connections("10.0.0.1") == 3
    assert isinstance(admission.arrive("10.0.0.1", 0.0), Arrival)


def test_a_new_connection_evicts_the_oldest_unauthenticated_one_of_its_address() -> None:
    admission = Admission(LIMITS)
    first, second, third = (arrive(admission, "10.0.0.1", now).ticket for now in (0.0, 1.0, 2.0))
    fourth = arrive(admission, "10.0.0.1", 3.0)
    [(victim, reason)] = fourth.evicted
    assert victim is first
    assert "limits.max_unauthenticated_per_address" in reason
    assert admission.unauthenticated("10.0.0.1") == 3
    assert admission.connections("10.0.0.1") == 3
    # The evicted connection's own close changes nothing more.
    admission.closed(first)
    assert admission.connections("10.0.0.1") == 3
    # An authenticated connection is never evicted.
    admission.authenticated(second)
    fifth = arrive(admission, "10.0.0.1", 4.0)
    assert fifth.evicted == ()
    sixth = arrive(admission, "10.0.0.1", 5.0)
    assert [v for v, _ in sixth.evicted] == [third]
    assert not second.released


def test_when_an_address_is_full_an_unauthenticated_connection_makes_room() -> None:
    admission = Admission(LIMITS)
    for _ in range(3):
        authenticated(admission, "10.0.0.1")
    waiting = arrive(admission, "10.0.0.1").ticket
    newcomer = arrive(admission, "10.0.0.1")
    assert [v for v, _ in newcomer.evicted] == [waiting]
    assert "limits.max_connections_per_address" in newcomer.evicted[0][1]
    assert admission.connections("10.0.0.1") == 4


def test_unauthenticated_connections_have_a_budget_in_all() -> None:
    admission = Admission(LIMITS)
    oldest = arrive(admission, "10.0.0.1").ticket
    for index in range(4):
        arrive(admission, f"10.0.1.{index}")
    arrival = arrive(admission, "10.0.2.1")
    assert [v for v, _ in arrival.evicted] == [oldest]
    assert "limits.max_unauthenticated)" in arrival.evicted[0][1]
    assert admission.unauthenticated() == 5
    assert admission.oldest_unauthenticated() is not None
    assert admission.unauthenticated() == 4


def test_a_flood_that_never_authenticates_cannot_keep_a_client_out() -> None:
    """However many connections an address opens without authenticating, a new
    one is admitted at once, and counts stay within their bounds."""
    admission = Admission(LIMITS)
    for now in range(1000):
        arrival = arrive(admission, "127.0.0.1", float(now))
        for victim, _ in arrival.evicted:
            admission.closed(victim)
        assert admission.unauthenticated("127.0.0.1") <= LIMITS.max_unauthenticated_per_address
        assert admission.connections("127.0.0.1") <= LIMITS.max_connections_per_address
    client = arrive(admission, "127.0.0.1", 1000.0).ticket
    admission.authenticated(client)
    assert admission.unauthenticated("127.0.0.1") == LIMITS.max_unauthenticated_per_address - 1


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
