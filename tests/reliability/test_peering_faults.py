"""Exactly-once, in-order delivery between queue managers survives a faulty network.

While :mod:`transfer_kit`'s committing client transfers messages from A to a
transactional queue on B, a :class:`~fault_proxy.FaultProxy` between A and B
cuts the connection (mid-frame too), stalls it, delays it and refuses
reconnections. Afterwards the destination holds every committed message
exactly once, in commit order, and nothing else; A's outgoing queue ends
empty with nothing unacknowledged. Queue managers killed during the
transfer: test_peering_crashes.

The default run transfers 3,000 messages over three seconds with at least
four cuts of live connections; the ``soak`` versions transfer 10,000 and
100,000 with more faults (``pytest -m soak``).
"""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest
from fault_proxy import FaultProxy
from fault_schedule import FaultSchedule
from helpers import PEER_FAST, DaemonProcess  # type: ignore[import-not-found, unused-ignore]
from transfer_kit import (
    Size,
    check_transfer,
    event_count,
    start_transfer,
    with_soak_sizes,
)

#: The proxy test's short run: three seconds leave room for cuts of every kind.
NETWORK_SIZES = with_soak_sizes(Size(3_000, seconds=3.0, min_cuts=4))


@pytest.mark.slow
@pytest.mark.parametrize("size", NETWORK_SIZES)
def test_a_faulty_network_loses_and_duplicates_nothing(
    daemon_factory: Callable[..., DaemonProcess], size: Size
) -> None:
    seed = 1901 + size.messages
    b = daemon_factory(name="qm-b", extra_args=PEER_FAST)
    with FaultProxy(b.peer_port, seed=seed) as proxy:
        a = daemon_factory(name="qm-a", extra_args=[*PEER_FAST, *proxy.route_args()])
        committer = start_transfer(a, b, size, seed)
        schedule = FaultSchedule(proxy, seed=seed, pause=size.pause, stall=size.stall)
        with schedule:
            ledger = committer.join(timeout=size.messages / 20)
            # At least the minimum of faults, while the backlog drains if need be.
            deadline = time.monotonic() + 60
            while schedule.cuts_of_live_connections < size.min_cuts and time.monotonic() < deadline:
                time.sleep(0.1)
        faults = "\n".join(schedule.log)
        assert schedule.cuts_of_live_connections >= size.min_cuts, (
            f"only {schedule.cuts_of_live_connections} cuts hit a live connection:\n{faults}"
        )
        assert schedule.mid_frame_cuts >= 1, f"no cut landed mid-chunk:\n{faults}"
        settle = check_transfer([("A", a)], b, ledger, size.watch)
        stats = proxy.snapshot()
    assert not ledger.in_doubt, "no queue manager died, yet a commit was in doubt"
    print(
        f"{size.messages} messages in {committer.elapsed:.1f} s, settled {settle:.1f} s later; "
        f"{stats}; B saw {event_count(b, 'peer_session_opened')} sessions"
    )
