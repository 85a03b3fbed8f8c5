"""Exactly-once, in-order delivery between queue managers survives SIGKILLs.

While :mod:`transfer_kit`'s committing client transfers messages, either
A (the sender) or B (the receiver) is SIGKILLed at random moments and started
again, or a router R between A and C (``routes`` on A) is. Afterwards the
destination holds every committed message exactly once, in commit order, and
nothing else; a transaction whose commit reply was lost to a kill of A ("in
doubt") is wholly present or wholly absent; every outgoing queue on the way
(A's, and the router's) ends empty with nothing unacknowledged. A faulty
network instead: test_peering_faults.

The default run transfers 2,000 messages over two seconds with two kills in
each test; the ``soak`` versions transfer 10,000 and 100,000 with more kills
(``pytest -m soak``).
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Iterable

import pytest
from helpers import PEER_FAST, ROUTER, DaemonProcess, route_args  # type: ignore[import-not-found, unused-ignore]
from transfer_kit import (
    Committer,
    Size,
    check_transfer,
    event_count,
    log_excerpt,
    start_transfer,
    with_soak_sizes,
)

from qmgr.client import ConnectionLost, connect

#: The crash tests' short run.
KILL_SIZES = with_soak_sizes(Size(2_000, seconds=2.0, kills=2))


@pytest.mark.slow
@pytest.mark.parametrize("size", KILL_SIZES)
@pytest.mark.parametrize("victim", ["sender", "receiver"])
def test_sigkill_of_either_end_loses_and_duplicates_nothing(
    daemon_factory: Callable[..., DaemonProcess], size: Size, victim: str
) -> None:
    seed = 1801 + size.messages + (victim == "receiver")
    rng = random.Random(seed)
    a = daemon_factory(name="qm-a", extra_args=PEER_FAST)
    b = daemon_factory(name="qm-b", extra_args=PEER_FAST)
    target = a if victim == "sender" else b
    committer = start_transfer(a, b, size, seed)
    in_flight = kill_during_transfer(committer, target, size, rng, [a])
    ledger = committer.join(timeout=size.messages / 20)
    settle = check_transfer([("A", a)], b, ledger, size.watch)
    if victim == "receiver":
        assert not ledger.in_doubt, "only B died, yet a commit on A was in doubt"
    assert event_count(target, "queue_manager_started") == size.kills + 1
    print(
        f"{size.messages} messages in {committer.elapsed:.1f} s with {size.kills} kills of "
        f"{victim}, settled {settle:.1f} s later; {len(ledger.in_doubt)} in doubt, "
        f"{ledger.reconnects} reconnects; in flight at each kill: {in_flight}"
    )


@pytest.mark.slow
@pytest.mark.parametrize("size", KILL_SIZES)
def test_sigkill_of_a_router_loses_and_duplicates_nothing(
    daemon_factory: Callable[..., DaemonProcess], size: Size
) -> None:
    seed = 1701 + size.messages
    rng = random.Random(seed)
    c = daemon_factory(name="qm-c", extra_args=PEER_FAST)
    r = daemon_factory(name="qm-r", extra_args=[*PEER_FAST, *ROUTER])
    a = daemon_factory(name="qm-a", extra_args=[*PEER_FAST, *route_args(c.peer_port, r.peer_port)])
    committer = start_transfer(a, c, size, seed)
    in_flight = kill_during_transfer(committer, r, size, rng, [a, r])
    ledger = committer.join(timeout=size.messages / 20)
    settle = check_transfer([("A", a), ("R", r)], c, ledger, size.watch)
    with connect(a.address) as qa:
        hops = {info.next_hop for info in qa.outgoing()}
    assert hops == {f"127.0.0.1:{r.peer_port}"}, f"A did not send through R: {hops}"
    assert not ledger.in_doubt, "only R died, yet a commit on A was in doubt"
    assert event_count(r, "queue_manager_started") == size.kills + 1
    print(
        f"{size.messages} messages in {committer.elapsed:.1f} s with {size.kills} kills of R, "
        f"settled {settle:.1f} s later; in flight at each kill: {in_flight}"
    )


def backlog(daemons: Iterable[DaemonProcess]) -> int:
    """Messages waiting or unacknowledged in these queue managers' outgoing queues."""
    total = 0
    for daemon in daemons:
        try:
            with connect(daemon.address, timeout=5.0) as qm:
                total += sum(info.waiting + info.unacknowledged for info in qm.outgoing())
        except ConnectionLost as exc:  # it is running: this is the daemon's failure
            message = f"{daemon.name} failed a client: {exc}\n{log_excerpt(daemon)}"
            raise AssertionError(message) from exc
    return total


def kill_during_transfer(
    committer: Committer,
    victim: DaemonProcess,
    size: Size,
    rng: random.Random,
    senders: list[DaemonProcess],
) -> list[int]:
    """SIGKILL ``victim`` ``size.kills`` times at random moments spread over the
    transfer (after random shares of the messages are committed, plus a random
    fraction of a second), starting it again each time.

    Returns:
        For each kill, the messages in flight in the ``senders``' outgoing
        queues just before it (0 would mean a kill between transfers).
    """
    in_flight = []
    marks = sorted(rng.sample(range(size.messages // 20, size.messages * 9 // 10), size.kills))
    for mark in marks:
        deadline = time.monotonic() + size.messages / 20
        while committer.committed < mark and committer.thread.is_alive():
            assert time.monotonic() < deadline, (
                f"the transfer stalled at {committer.committed} messages\n{log_excerpt(victim)}"
            )
            time.sleep(0.005)
        time.sleep(rng.uniform(0.0, 0.3))
        in_flight.append(backlog(senders))
        victim.kill()
        time.sleep(rng.uniform(0.0, 0.3))
        victim.start()
    assert any(in_flight), f"every kill came with nothing in flight: {in_flight}"
    return in_flight
