"""Outgoing queues removed when idle, and created again, while the sender or the receiver is
killed (SIGKILL) around the removal: every committed message arrives once, in order, and
the receiver keeps one stream per queue (the recreated queues take their sequences over)."""

from __future__ import annotations

import random
import time
from collections.abc import Callable

import pytest
from helpers import PEER_FAST, DaemonProcess, drain, remote_queue, settings, wait_until

from qmgr.client import connect

QUEUES = ("q0", "q1", "q2")
#: peers.outgoing_cleanup_after of the sender: a queue quiet this long goes.
CLEANUP = 1.0


def outgoing_empty(a: DaemonProcess) -> bool:
    with connect(a.address) as qa:
        return all(q.waiting == 0 and q.unacknowledged == 0 for q in qa.outgoing())


@pytest.mark.slow
@pytest.mark.parametrize("seed", [7, pytest.param(8, marks=pytest.mark.soak)])
def test_sigkill_around_the_removal_of_idle_queues_loses_and_duplicates_nothing(
    daemon_factory: Callable[..., DaemonProcess], seed: int
) -> None:
    rng = random.Random(seed)
    a = daemon_factory(
        name="qm-a",
        extra_args=[*PEER_FAST, *settings(f"peers.outgoing_cleanup_after={CLEANUP}")],
    )
    b = daemon_factory(name="qm-b", extra_args=PEER_FAST)
    with connect(b.address) as qb:
        for queue in QUEUES:
            qb.create_queue(queue, transactional=True)
    sent: dict[str, list[bytes]] = {queue: [] for queue in QUEUES}
    rounds = 4 if seed == 7 else 20
    for round_ in range(rounds):
        with connect(a.address) as qa:
            for tx in range(rng.randint(1, 6)):
                queue = rng.choice(QUEUES)
                bodies = [f"{round_}-{tx}-{i}".encode() for i in range(rng.randint(1, 3))]
                with qa.begin() as t:
                    for data in bodies:
                        t.send(remote_queue(b, queue), data)
                sent[queue].extend(bodies)
        wait_until(lambda: outgoing_empty(a), timeout=30.0)
        # Quiet: the cleanup removes the queues between CLEANUP and 1.25 x CLEANUP
        # from now; one end dies somewhere around that, then comes back.
        time.sleep(rng.uniform(0.8, 1.5) * CLEANUP)
        victim = rng.choice((a, b))
        victim.kill()
        victim.start()
    wait_until(lambda: outgoing_empty(a), timeout=30.0)
    with connect(b.address) as qb, connect(a.address) as qa:
        for queue in QUEUES:
            assert [body for _, body in drain(b.address, queue)] == sent[queue], queue
        streams = [s for s in qb.status().incoming if s.source_qm == qa.qm_guid]
        # One stream per queue that was sent to: recreated queues went on with theirs.
        assert len(streams) == sum(1 for queue in QUEUES if sent[queue])
        dead = sum(q.depth for q in qb.list_queues() if q.kind != "normal")
        assert dead == 0
    assert "outgoing_queue_removed" in a.log()
